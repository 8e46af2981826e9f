#![no_main]
//! Fuzz target `data_url`: one input through [`mco::fuzzing::data_url`] (which documents what it checks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| mco::fuzzing::data_url(data));
