#![no_main]
//! Fuzz target `label_selector`: one input through [`mco::fuzzing::label_selector`] (which documents what it checks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| mco::fuzzing::label_selector(data));
