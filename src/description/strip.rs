//! Dropping debug information from the runtime library when it is packed.
//!
//! The release profile keeps line tables (`debug = 1`) so benchmarks and profilers can name
//! source lines; that is 80 % of the library's size and of no use inside an FMU. Stripping
//! at packaging keeps one build for tests, benchmarks and export, and works on any library
//! given with `--library`. The symbol table stays, so a panic's backtrace still names
//! functions.

/// `lib` without its `.debug_*` / `.zdebug_*` sections (like `strip --strip-debug`).
/// A library without such sections is returned unchanged, byte for byte.
pub fn strip_debug_info(lib: &[u8]) -> Result<Vec<u8>, String> {
    let is_debug = |name: &[u8]| name.starts_with(b".debug") || name.starts_with(b".zdebug");
    let mut builder = object::build::elf::Builder::read(lib).map_err(|e| e.to_string())?;
    let mut any = false;
    for section in builder.sections.iter_mut() {
        if is_debug(section.name.as_slice()) {
            section.delete = true;
            any = true;
        }
    }
    if !any {
        return Ok(lib.to_vec());
    }
    let mut out = Vec::with_capacity(lib.len() / 4);
    // `write` also drops the symbols and relocations that refer to the deleted sections.
    builder.write(&mut out).map_err(|e| e.to_string())?;
    Ok(out)
}
