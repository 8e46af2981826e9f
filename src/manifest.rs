//! TEMPORARY stand-in until the manifest branch merges.
use crate::model::{MachineConfig, MachineConfigPool};
use crate::validation::Invalid;
pub fn validate_machine_config(_mc: &MachineConfig) -> Result<Option<crate::ignition::Config>, Invalid> {
    Ok(None)
}
pub fn validate_pool(_p: &MachineConfigPool) -> Result<(), Invalid> {
    Ok(())
}
pub enum Manifest {
    MachineConfig(MachineConfig),
    MachineConfigPool(MachineConfigPool),
}
pub fn parse_documents(_t: &str) -> Vec<Result<Manifest, String>> {
    vec![]
}
