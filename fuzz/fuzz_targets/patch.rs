#![no_main]
//! Fuzz target `patch`: one input through [`mco::fuzzing::patch`] (which documents what it checks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| mco::fuzzing::patch(data));
