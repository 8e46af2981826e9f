//! Ignition 3.x as MachineConfigs carry it: types, parsing, validation, contents decoding, and
//! spec 2 input translated to spec 3 as MCO does (`spec2`).
//!
//! Owns the one in-memory shape of an Ignition config ([`Config`]), a superset of specs 3.0.0 to
//! 3.4.0 restricted to what mco manages (files, systemd units and dropins, the core user's SSH
//! keys). Sections mco does not manage are kept as raw JSON only so that they can be refused with
//! a field path ([`parse_config`]). The rules for single names and paths live in `names`, how
//! the paths of one config relate in `conflicts`, the data URL decoder in `dataurl`. Pure: no
//! IO.

mod conflicts;
mod dataurl;
mod names;
pub mod spec2;
mod types;
mod validate;

pub use dataurl::decode_data_url;
pub use names::*;
pub use types::*;
pub use validate::*;
