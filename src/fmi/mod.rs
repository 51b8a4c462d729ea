//! The FMI 2.0 and FMI 3.0 C ABI. The only unsafe code of the crate.
