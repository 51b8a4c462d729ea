//! Names of the `binaries/` platform folders: FMI 2.0 (section 2.3: `win32`, `win64`,
//! `linux32`, `linux64`, `darwin32`, `darwin64`) and FMI 3.0 platform tuples `<arch>-<sys>`
//! (section 2.5.1.4), in one table with the counterpart in the other version where there is a
//! one-to-one correspondence.

use super::xml::FmiVersion;

/// A platform: its folder name in FMI 2 and in FMI 3 (`None`: that version has no name for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Platform {
    pub fmi2: Option<&'static str>,
    pub fmi3: Option<&'static str>,
    pub what: &'static str,
}

impl Platform {
    pub fn name(&self, version: FmiVersion) -> Option<&'static str> {
        match version {
            FmiVersion::Fmi2 => self.fmi2,
            FmiVersion::Fmi3 => self.fmi3,
        }
    }
}

const fn both(fmi2: &'static str, fmi3: &'static str, what: &'static str) -> Platform {
    Platform {
        fmi2: Some(fmi2),
        fmi3: Some(fmi3),
        what,
    }
}

const fn only2(fmi2: &'static str, what: &'static str) -> Platform {
    Platform {
        fmi2: Some(fmi2),
        fmi3: None,
        what,
    }
}

const fn only3(fmi3: &'static str, what: &'static str) -> Platform {
    Platform {
        fmi2: None,
        fmi3: Some(fmi3),
        what,
    }
}

/// Every platform folder name `export --extra-binary` accepts.
pub const PLATFORMS: &[Platform] = &[
    both("win64", "x86_64-windows", "64-bit Windows on x86"),
    both("win32", "i686-windows", "32-bit Windows on x86"),
    both("linux64", "x86_64-linux", "64-bit Linux on x86"),
    both("linux32", "i686-linux", "32-bit Linux on x86"),
    both("darwin64", "x86_64-darwin", "64-bit macOS on x86"),
    only2("darwin32", "32-bit macOS"),
    only3("aarch64-darwin", "macOS on Apple silicon (ARM 64-bit)"),
    only3("aarch64-linux", "Linux on ARM 64-bit"),
    only3("aarch64-windows", "Windows on ARM 64-bit"),
    only3("aarch32-linux", "Linux on ARM 32-bit"),
];

/// The platform whose FMI 2 or FMI 3 folder is `name`.
pub fn platform(name: &str) -> Option<&'static Platform> {
    PLATFORMS
        .iter()
        .find(|p| p.fmi2 == Some(name) || p.fmi3 == Some(name))
}

/// The folder of 64-bit Linux (the library given by `--library`).
pub fn linux_platform(version: FmiVersion) -> &'static str {
    PLATFORMS[2].name(version).expect("linux64 has both names")
}

/// The folder name under `binaries/` for the platform named `name` in an FMU of `version`.
/// `translate`: `name` may be the other version's name for the same platform (an export of
/// both versions with one `--extra-binary`); otherwise it must be `version`'s own name. The
/// error says why not, in words for `--extra-binary`.
pub fn platform_folder(
    version: FmiVersion,
    name: &str,
    translate: bool,
) -> Result<&'static str, String> {
    let v = version.number();
    let names = |version: FmiVersion| {
        PLATFORMS
            .iter()
            .filter_map(|p| p.name(version))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(p) = platform(name) else {
        return Err(format!(
            "unknown platform `{name}`: importers look only in the standard folders, for FMI 2 {} \
             and for FMI 3 {}",
            names(FmiVersion::Fmi2),
            names(FmiVersion::Fmi3)
        ));
    };
    let own = p.name(version);
    if own == Some(name) {
        return Ok(own.expect("just compared"));
    }
    let other = 5 - v; // the other version's number
    match own {
        Some(own) if translate => Ok(own),
        Some(own) => Err(format!(
            "`{name}` is the FMI {other} name of {}; in an FMI {v} FMU its folder is `{own}` (use {own}=PATH)",
            p.what
        )),
        None => Err(format!(
            "`{name}` ({}) is an FMI {other} platform and FMI {v} has no platform name for it; \
             export FMI {other} only (--fmi {other}) to include this library",
            p.what
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for p in PLATFORMS {
            for n in [p.fmi2, p.fmi3].into_iter().flatten() {
                assert!(seen.insert(n), "{n} twice");
            }
            if let Some(n) = p.fmi3 {
                assert!(n.split('-').count() == 2, "{n}");
            }
            if let Some(n) = p.fmi2 {
                assert!(!n.contains('-'), "{n}");
            }
        }
        assert_eq!(linux_platform(FmiVersion::Fmi2), "linux64");
        assert_eq!(linux_platform(FmiVersion::Fmi3), "x86_64-linux");
    }

    #[test]
    fn translation_and_refusals() {
        use FmiVersion::{Fmi2, Fmi3};
        assert_eq!(platform_folder(Fmi2, "x86_64-windows", true), Ok("win64"));
        assert_eq!(platform_folder(Fmi3, "win64", true), Ok("x86_64-windows"));
        assert_eq!(
            platform_folder(Fmi3, "x86_64-windows", false),
            Ok("x86_64-windows")
        );
        assert_eq!(platform_folder(Fmi2, "i686-linux", true), Ok("linux32"));
        let e = platform_folder(Fmi2, "x86_64-windows", false).unwrap_err();
        assert!(e.contains("`win64`"), "{e}");
        let e = platform_folder(Fmi2, "aarch64-darwin", true).unwrap_err();
        assert!(
            e.contains("FMI 2 has no platform name") && e.contains("--fmi 3"),
            "{e}"
        );
        let e = platform_folder(Fmi3, "darwin32", true).unwrap_err();
        assert!(
            e.contains("FMI 3 has no platform name") && e.contains("--fmi 2"),
            "{e}"
        );
        let e = platform_folder(Fmi3, "windows64", true).unwrap_err();
        assert!(e.contains("unknown platform"), "{e}");
    }
}
