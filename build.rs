//! Build script: only makes cargo rebuild the crate when a file under `web/` is added or
//! removed. rust-embed (`src/api/ui.rs`) tracks the files it embedded, not the folder, so a new
//! dashboard file alone would otherwise be left out of an incremental build.

fn main() {
    // A directory here is scanned recursively (its files' modification times).
    println!("cargo:rerun-if-changed=web");
}
