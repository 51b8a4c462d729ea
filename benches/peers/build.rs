//! Compiles the hand-written minimal-coordinate right-hand sides (`csrc/minimal.c`, issue 15)
//! with the system C compiler at -O2 (what an FMU's generated C would get).
fn main() {
    println!("cargo:rerun-if-changed=csrc/minimal.c");
    cc::Build::new()
        .file("csrc/minimal.c")
        .opt_level(2)
        .compile("mbs_minimal");
    println!("cargo:rustc-link-lib=m");
}
