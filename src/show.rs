//! Numbers in messages.

/// A number in a message as a user reads it: plain in a moderate range (`0.3`, `2000`), with an
/// exponent outside it (`1e-300`, not three hundred digits; `1e-15`, not `0.000000000000001`).
pub fn show_number(x: f64) -> String {
    let a = x.abs();
    if x == 0.0 || (1e-4..1e15).contains(&a) || !x.is_finite() {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}
