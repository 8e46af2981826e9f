#![no_main]
//! Fuzz target `watch_query`: one input through [`mco::fuzzing::watch_query`] (which documents what it checks).

libfuzzer_sys::fuzz_target!(|data: &[u8]| mco::fuzzing::watch_query(data));
