#![no_main]
//! Fuzz target `gzip`: one input through [`mco::fuzzing::gzip`] (which documents what it checks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| mco::fuzzing::gzip(data));
