//! Serialized FMU state: a versioned byte format with a header and a checksum.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "MBSFMUST"
//!      8     4  format version (u32 LE), currently 11 (the history of formats is in docs/fmi-runtime.md)
//!     12    38  model token (the instance's GUID / instantiationToken, ASCII)
//!     50     8  payload length (u64 LE)
//!     58    16  checksum: first 16 bytes of SHA-256 over bytes 0..58 and the payload
//!     74     n  payload: the snapshot, postcard-encoded
//! ```
//! Decoding checks every field before touching the payload, so foreign or corrupt bytes give
//! an error, never a crash; a state from another model (another token) is refused.

use super::Snapshot;
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 8] = b"MBSFMUST";
// 2: the co-simulation state carries the event locator (contact events).
// 3: the event locator remembers which event its last step was located on.
// 4: (earlier changes of the engine state).
// 5: joint friction laws carry stiction and radius, joint stops; the engine keeps stick states.
// 6: contacts carry friction; the engine keeps the contacts' friction and stick states.
// 7: spring laws carry curves (table spring on the C² curve, torsion and bushing tables).
// 8: the local linearization keeps its Jacobian over steps (age, freshness, forcing term).
// 9: Rosenbrock–Nyström keeps `‖Φq‖ ‖Φu⁻¹‖` of its partition (re-partitioning rule).
// 10: Dormand–Prince and the Newmark family keep their flag for derivatives to re-evaluate
//     (set by `rhs_changed` and by `restart` after an input jump).
// 11: revolute joints and rotational springs carry their initial angle, the engine the angle
//     slots' starts (angle branches start at `initial_angle`, not in (−π, π]).
const VERSION: u32 = 11;
const TOKEN_LEN: usize = 38;
const HEADER: usize = 8 + 4 + TOKEN_LEN + 8;
const SUM: usize = 16;

fn checksum(header: &[u8], payload: &[u8]) -> [u8; SUM] {
    let mut h = Sha256::new();
    h.update(header);
    h.update(payload);
    let d = h.finalize();
    let mut out = [0u8; SUM];
    out.copy_from_slice(&d[..SUM]);
    out
}

fn token_bytes(token: &str) -> [u8; TOKEN_LEN] {
    let mut out = [b' '; TOKEN_LEN];
    for (o, b) in out.iter_mut().zip(token.bytes()) {
        *o = b;
    }
    out
}

pub(crate) fn encode(token: &str, snap: &Snapshot) -> Result<Vec<u8>, String> {
    let payload =
        postcard::to_stdvec(snap).map_err(|e| format!("cannot serialize the FMU state: {e}"))?;
    let mut out = Vec::with_capacity(HEADER + SUM + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&token_bytes(token));
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let sum = checksum(&out, &payload);
    out.extend_from_slice(&sum);
    out.extend_from_slice(&payload);
    Ok(out)
}

pub(crate) fn decode(token: &str, bytes: &[u8]) -> Result<Snapshot, String> {
    if bytes.len() < HEADER + SUM {
        return Err(format!(
            "serialized FMU state too short ({} bytes)",
            bytes.len()
        ));
    }
    if &bytes[..8] != MAGIC {
        return Err("not a serialized FMU state of mbsfmu (bad magic)".into());
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(format!(
            "serialized FMU state has format version {version}, this FMU reads version {VERSION}"
        ));
    }
    if bytes[12..12 + TOKEN_LEN] != token_bytes(token) {
        return Err(
            "the serialized FMU state belongs to a different model (token mismatch)".into(),
        );
    }
    let len = u64::from_le_bytes(bytes[12 + TOKEN_LEN..HEADER].try_into().expect("8 bytes"));
    if len != (bytes.len() - HEADER - SUM) as u64 {
        return Err(format!(
            "serialized FMU state: payload length {len} does not match the {} bytes given",
            bytes.len() - HEADER - SUM
        ));
    }
    let payload = &bytes[HEADER + SUM..];
    if checksum(&bytes[..HEADER], payload)[..] != bytes[HEADER..HEADER + SUM] {
        return Err("serialized FMU state is corrupt (checksum mismatch)".into());
    }
    postcard::from_bytes(payload).map_err(|e| format!("serialized FMU state is corrupt: {e}"))
}
