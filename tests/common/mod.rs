//! Shared helpers for integration tests (`mod common;` in a test file).
// Each test binary uses only part of the helpers.
#![allow(dead_code)]

pub mod closed_form;
pub mod cosim;
pub mod elements;
