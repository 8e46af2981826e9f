#![no_main]
//! Fuzz target `ignition`: one input through [`mco::fuzzing::ignition`] (which documents what it checks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| mco::fuzzing::ignition(data));
