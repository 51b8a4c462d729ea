//! Restrict the cdylib's exported symbols to the FMI functions (see src/fmi/exports.map).

fn main() {
    let map = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/fmi/exports.map");
    println!("cargo:rerun-if-changed={}", map.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            map.display()
        );
    }
}
