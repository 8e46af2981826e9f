#![no_main]
//! Fuzz target `manifest`: one input through [`mco::fuzzing::manifest`] (which documents what it checks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| mco::fuzzing::manifest(data));
