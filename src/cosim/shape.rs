//! Structural check of a deserialized FMU state: never trust a size in the payload.
//!
//! A serialized state is checksummed, but anyone can recompute a checksum, so the bytes are
//! treated as hostile. [`Shape::of`] walks any `Serialize` value (through serde, so fields added
//! later are covered without code here) and records, per field path, the sizes it holds:
//! sequence lengths, the dimensions of nalgebra matrices, integer values inside sequences
//! (index vectors: pivots, partitions, patterns). It refuses outright a matrix whose stored
//! dimensions do not multiply (without overflow) to its element count: nalgebra's own
//! deserializer multiplies with wrap-around, and such a matrix makes safe-looking indexing
//! write out of bounds.
//!
//! [`Shape::check_against`] then compares a candidate with a reference the instance built
//! itself (its own engine, an integrator of the same method initialized on this model): every
//! size present in both must agree, sizes only in the candidate must stay within the
//! reference's largest dimension, and so must every integer inside a sequence. Paths whose
//! length legitimately changes during a run are listed in `VARIABLE`.

use serde::ser::{self, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// What a path holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Node {
    /// A sequence of this length (several elements merged: the largest).
    Seq(u64),
    /// A nalgebra matrix: rows, columns (`None` for a dimension fixed at compile time).
    Matrix(Option<u64>, Option<u64>),
    /// An integer (inside sequences: the largest seen).
    Int(u64),
    /// The numbers of a method constant (controller parameters, tableaux), hashed in order.
    Float(u64),
    /// A step size: must be finite and not negative.
    StepSize(f64),
}

/// The sizes of a value, by field path (`.field`, `[]` for all elements of a sequence, `?` for
/// the inside of an `Option`, `:Variant` for an enum's variant).
#[derive(Debug, Clone, Default)]
pub struct Shape {
    nodes: BTreeMap<String, Node>,
    /// Integers stored as sequence elements, by path: the largest.
    ints_in_seq: BTreeMap<String, u64>,
    /// Every integer by path, hashed in order (for [`Shape::check_integers_equal`]).
    int_hash: BTreeMap<String, u64>,
}

/// Fields whose length changes during a run (history buffers, lists of kinks): compared only
/// against the bound, not for equality.
const VARIABLE: &[&str] = &[
    "kinks", "history", "dropped", "report", "z", "k", "rcont", "active",
];

/// Integer fields that are dimensions of the model: must equal the reference's.
const DIMENSIONS: &[&str] = &["nq", "nc", "ny", "nd", "n_q", "n_c", "max_order", "s"];

/// Integer fields bounded by the reference's `max_order` (multistep order).
const ORDERS: &[&str] = &["order", "order_next", "fixed_order"];

/// Number fields that are constants of the method (step-size controller, Butcher and
/// Rosenbrock tableaux, Newmark parameters): must equal the reference's bit for bit.
const CONSTANTS: &[&str] = &[
    "safety",
    "min_factor",
    "max_factor",
    "beta1",
    "beta2",
    "tab",
    "par",
];

/// Flags that are run state, not structure (friction stick states, `mbs::friction`): their
/// values are free; the sizes around them are checked as usual.
const RUN_FLAGS: &[&str] = &["stick", "armed"];

/// Step sizes: finite and not negative (a NaN step size never reaches the minimum step).
const STEP_SIZES: &[&str] = &["h", "h_next", "h_prev", "dense_h"];

#[derive(Debug)]
pub struct ShapeError(pub String);
impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ShapeError {}
impl ser::Error for ShapeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ShapeError(msg.to_string())
    }
}

impl Shape {
    /// Walk `v`; fails on a matrix whose dimensions do not match its element count.
    pub fn of<T: Serialize + ?Sized>(v: &T) -> Result<Shape, String> {
        let mut w = Walker {
            path: String::new(),
            shape: Shape::default(),
            last: Kind::Other,
            in_seq: 0,
        };
        v.serialize(&mut w).map_err(|e| e.0)?;
        Ok(w.shape)
    }

    /// The largest dimension anywhere in this shape (sequence length, matrix dimension).
    pub fn largest(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| match *n {
                Node::Seq(l) => l,
                Node::Matrix(r, c) => r.unwrap_or(0).max(c.unwrap_or(0)),
                Node::Int(_) | Node::Float(_) | Node::StepSize(_) => 0,
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether `self` (from a payload) fits `reference` (built by this instance). `bound`
    /// limits every size and index that the reference does not pin down.
    pub fn check_against(&self, reference: &Shape, bound: u64, what: &str) -> Result<(), String> {
        for (path, node) in &self.nodes {
            let variable = is_variable(path);
            let too_big = |n: u64| n > bound;
            match (*node, reference.nodes.get(path)) {
                // A workspace the reference has not allocated yet (allocated on first use)
                // is only bounded.
                (Node::Matrix(r, c), Some(&Node::Matrix(rr, rc)))
                    if !variable && rr != Some(0) && rc != Some(0) =>
                {
                    if (r, c) != (rr, rc) {
                        return Err(format!(
                            "{what}: matrix {path} is {}x{}, this model needs {}x{}",
                            dim(r),
                            dim(c),
                            dim(rr),
                            dim(rc)
                        ));
                    }
                }
                (Node::Seq(l), Some(&Node::Seq(rl))) if !variable && rl != 0 => {
                    if l != rl {
                        return Err(format!(
                            "{what}: {path} has {l} entries, this model needs {rl}"
                        ));
                    }
                }
                (Node::Int(v), Some(&Node::Int(rv))) => {
                    let name = path.rsplit('.').next().unwrap_or("");
                    if DIMENSIONS.contains(&name) && v != rv {
                        return Err(format!(
                            "{what}: dimension {path} = {v}, this model has {rv}"
                        ));
                    }
                }
                (Node::Float(v), Some(&Node::Float(rv))) => {
                    if v != rv {
                        return Err(format!(
                            "{what}: {path} differs from the constants of this method"
                        ));
                    }
                }
                (Node::Float(_), _) => {}
                (Node::StepSize(h), _) => {
                    if !(h.is_finite() && h >= 0.0) {
                        return Err(format!("{what}: step size {path} = {h}"));
                    }
                }
                (Node::Matrix(r, c), _) => {
                    if r.is_some_and(too_big) || c.is_some_and(too_big) {
                        return Err(format!(
                            "{what}: matrix {path} is {}x{}, larger than any size of this model ({bound})",
                            dim(r),
                            dim(c)
                        ));
                    }
                }
                (Node::Seq(l), _) => {
                    if too_big(l) {
                        return Err(format!(
                            "{what}: {path} has {l} entries, more than any size of this model ({bound})"
                        ));
                    }
                }
                (Node::Int(v), _) => {
                    // An order is bounded by the reference's `max_order` beside it.
                    let name = path.rsplit('.').next().unwrap_or("");
                    if ORDERS.contains(&name) {
                        let max = path
                            .rsplit_once('.')
                            .and_then(|(parent, _)| {
                                reference.nodes.get(&format!("{parent}.max_order"))
                            })
                            .map_or(0, |n| match *n {
                                Node::Int(m) => m,
                                _ => 0,
                            });
                        if v > max.max(6) {
                            return Err(format!("{what}: order {path} = {v} above {}", max.max(6)));
                        }
                    }
                }
            }
        }
        for (path, &v) in &self.ints_in_seq {
            // An index is below the reference's largest at this path (patterns, partitions)
            // or below the length of its sequence (pivots); elsewhere below the bound.
            let seq = path.strip_suffix("[]").unwrap_or(path);
            let variable = is_variable(seq);
            let limit = match (reference.ints_in_seq.get(path), reference.nodes.get(seq)) {
                _ if variable => bound.max(1),
                (None, None) => bound.max(1),
                // A pattern the reference has not filled yet (made on first use: the
                // diagonal mass pattern of a BDF that has restarted on an input jump) is only
                // bounded. Judged against its empty length, a legitimate state was refused.
                (None, Some(&Node::Seq(0))) => bound.max(1),
                (r, l) => {
                    let l = match l {
                        Some(&Node::Seq(l)) => l,
                        _ => 0,
                    };
                    r.map_or(0, |r| r.saturating_add(1)).max(l)
                }
            };
            if v >= limit {
                return Err(format!(
                    "{what}: index {v} in {path} is out of range for this model (< {limit})"
                ));
            }
        }
        Ok(())
    }
}

impl Shape {
    /// Every integer (indices, counts, enum tags aside) equal to the reference's, path by
    /// path, except in `VARIABLE` fields: for a value whose integer structure is fixed by the
    /// model (the engine: body offsets, constraint rows, coordinate slots).
    pub fn check_integers_equal(&self, reference: &Shape, what: &str) -> Result<(), String> {
        // No part the reference does not have (another enum variant, another element kind).
        if let Some(p) = self
            .nodes
            .keys()
            .find(|p| !is_variable(p) && !reference.nodes.contains_key(*p))
        {
            return Err(format!("{what}: {p} is not part of this model's structure"));
        }
        for (path, h) in &self.int_hash {
            if is_variable(path) {
                continue;
            }
            match reference.int_hash.get(path) {
                Some(r) if r == h => {}
                _ => {
                    return Err(format!(
                        "{what}: the integers in {path} differ from this model's structure"
                    ))
                }
            }
        }
        Ok(())
    }
}

/// Whether a path lies in a field whose size legitimately changes (`VARIABLE`).
fn is_variable(path: &str) -> bool {
    path.split(['.', '[', ']', '?', ':'])
        .any(|seg| VARIABLE.contains(&seg))
}

fn dim(d: Option<u64>) -> String {
    d.map_or_else(|| "N".into(), |d| d.to_string())
}

/// What the last serialized value was (for recognizing nalgebra's `(data, nrows, ncols)`).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Seq(u64),
    U64(u64),
    Unit,
    Other,
}

struct Walker {
    path: String,
    shape: Shape,
    last: Kind,
    /// Nesting depth of sequences around the current value.
    in_seq: usize,
}

impl Walker {
    fn int(&mut self, v: u64) {
        self.last = Kind::U64(v);
        let h = self.shape.int_hash.entry(self.path.clone()).or_insert(0);
        *h = h.wrapping_mul(0x100_0000_01b3).wrapping_add(v);
        if self.in_seq > 0 {
            let e = self.shape.ints_in_seq.entry(self.path.clone()).or_insert(0);
            *e = (*e).max(v);
        } else {
            self.shape.nodes.insert(self.path.clone(), Node::Int(v));
        }
    }
    /// Record a flag or an enum variant in the integer structure (a particle's kind changed
    /// to rigid reads beyond its coordinates).
    fn tag(&mut self, v: u32) {
        let h = self
            .shape
            .int_hash
            .entry(format!("{}#", self.path))
            .or_insert(0);
        *h = h.wrapping_mul(0x100_0000_01b3).wrapping_add(2 + v as u64);
    }

    /// Record method constants (hashed, in order) and step sizes.
    fn float(&mut self, v: f64) {
        let segs = || {
            self.path
                .split(['.', '[', ']', '?', ':'])
                .filter(|s| !s.is_empty())
        };
        if segs().any(|s| CONSTANTS.contains(&s)) {
            let e = self
                .shape
                .nodes
                .entry(self.path.clone())
                .or_insert(Node::Float(0));
            if let Node::Float(h) = e {
                *h = h.wrapping_mul(0x100_0000_01b3).wrapping_add(v.to_bits());
            }
        } else if self.in_seq == 0 {
            let last = self.path.rsplit('.').next().unwrap_or("");
            if STEP_SIZES.contains(&last) {
                self.shape
                    .nodes
                    .insert(self.path.clone(), Node::StepSize(v));
            }
        }
    }
    fn put(&mut self, node: Node) {
        let e = self.shape.nodes.entry(self.path.clone()).or_insert(node);
        *e = match (*e, node) {
            (Node::Seq(a), Node::Seq(b)) => Node::Seq(a.max(b)),
            (Node::Matrix(a, b), Node::Matrix(c, d)) => Node::Matrix(a.max(c), b.max(d)),
            (_, n) => n,
        };
    }
    fn with<F>(&mut self, seg: &str, f: F) -> Result<(), ShapeError>
    where
        F: FnOnce(&mut Walker) -> Result<(), ShapeError>,
    {
        let n = self.path.len();
        self.path.push_str(seg);
        let r = f(self);
        self.path.truncate(n);
        r
    }
}

type R = Result<(), ShapeError>;

impl<'a> ser::Serializer for &'a mut Walker {
    type Ok = ();
    type Error = ShapeError;
    type SerializeSeq = Seq<'a>;
    type SerializeTuple = Tuple<'a>;
    type SerializeTupleStruct = Tuple<'a>;
    type SerializeTupleVariant = Tuple<'a>;
    type SerializeMap = Seq<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Struct<'a>;

    fn serialize_bool(self, v: bool) -> R {
        self.last = Kind::Other;
        let name = self.path.rsplit('.').next().unwrap_or("");
        if RUN_FLAGS.contains(&name) {
            return Ok(());
        }
        // Flags are structure too.
        self.tag(v as u32);
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> R {
        self.int(v);
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> R {
        self.last = Kind::Other;
        self.float(v);
        Ok(())
    }
    fn serialize_char(self, _: char) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_str(self, _: &str) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_bytes(self, b: &[u8]) -> R {
        self.put(Node::Seq(b.len() as u64));
        self.last = Kind::Seq(b.len() as u64);
        Ok(())
    }
    fn serialize_none(self) -> R {
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> R {
        self.with("?", |w| v.serialize(w))?;
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_unit(self) -> R {
        self.last = Kind::Unit;
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> R {
        self.last = Kind::Unit;
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, index: u32, _: &'static str) -> R {
        self.last = Kind::Other;
        self.tag(index);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> R {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        index: u32,
        variant: &'static str,
        v: &T,
    ) -> R {
        self.tag(index);
        self.with(&format!(":{variant}"), |w| v.serialize(w))?;
        self.last = Kind::Other;
        Ok(())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Seq<'a>, ShapeError> {
        self.in_seq += 1;
        let n = self.path.len();
        self.path.push_str("[]");
        Ok(Seq {
            w: self,
            count: 0,
            declared: len,
            restore: n,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Tuple<'a>, ShapeError> {
        Ok(Tuple {
            w: self,
            i: 0,
            kinds: Vec::with_capacity(len),
        })
    }
    fn serialize_tuple_struct(self, _: &'static str, len: usize) -> Result<Tuple<'a>, ShapeError> {
        self.serialize_tuple(len)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Tuple<'a>, ShapeError> {
        self.tag(index);
        self.path.push(':');
        self.path.push_str(variant);
        self.serialize_tuple(len)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Seq<'a>, ShapeError> {
        self.serialize_seq(len)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Struct<'a>, ShapeError> {
        let n = self.path.len();
        Ok(Struct {
            w: self,
            restore: n,
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        index: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Struct<'a>, ShapeError> {
        self.tag(index);
        let n = self.path.len();
        self.path.push(':');
        self.path.push_str(variant);
        Ok(Struct {
            w: self,
            restore: n,
        })
    }
}

pub struct Seq<'a> {
    w: &'a mut Walker,
    count: u64,
    declared: Option<usize>,
    restore: usize,
}

impl Seq<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.count += 1;
        v.serialize(&mut *self.w)
    }
    fn finish(self) -> R {
        self.w.path.truncate(self.restore);
        self.w.in_seq -= 1;
        if let Some(d) = self.declared {
            if d as u64 != self.count {
                return Err(ShapeError(format!(
                    "sequence {} length mismatch",
                    self.w.path
                )));
            }
        }
        self.w.put(Node::Seq(self.count));
        self.w.last = Kind::Seq(self.count);
        Ok(())
    }
}

impl ser::SerializeSeq for Seq<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.element(v)
    }
    fn end(self) -> R {
        self.finish()
    }
}

impl ser::SerializeMap for Seq<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> R {
        k.serialize(&mut *self.w)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.element(v)
    }
    fn end(self) -> R {
        self.finish()
    }
}

pub struct Tuple<'a> {
    w: &'a mut Walker,
    i: usize,
    kinds: Vec<Kind>,
}

impl Tuple<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        let r = self.w.with(&format!(".{}", self.i), |w| v.serialize(w));
        self.i += 1;
        self.kinds.push(self.w.last);
        r
    }
    /// nalgebra's `VecStorage` is `(data, nrows, ncols)`; a static dimension is `()`.
    fn finish(self) -> R {
        self.w.last = Kind::Other;
        if let [Kind::Seq(len), a, b] = self.kinds[..] {
            let dim = |k: Kind| match k {
                Kind::U64(v) => Some(Some(v)),
                Kind::Unit => Some(None),
                _ => None,
            };
            if let (Some(r), Some(c)) = (dim(a), dim(b)) {
                let ok = match (r, c) {
                    (Some(r), Some(c)) => r.checked_mul(c) == Some(len),
                    // One dimension fixed (≥ 1): the other cannot exceed the element count.
                    (Some(d), None) | (None, Some(d)) => d <= len,
                    (None, None) => true,
                };
                if !ok {
                    return Err(ShapeError(format!(
                        "matrix {} is {}x{} but holds {len} numbers",
                        self.w.path,
                        dim_s(r),
                        dim_s(c)
                    )));
                }
                // Record the matrix itself; its parts are not sizes of their own.
                for k in 0..3 {
                    let part = format!("{}.{k}", self.w.path);
                    self.w.shape.nodes.remove(&part);
                    self.w.shape.ints_in_seq.remove(&part);
                    self.w.shape.int_hash.remove(&part);
                }
                self.w.put(Node::Matrix(r, c));
            }
        }
        Ok(())
    }
}

fn dim_s(d: Option<u64>) -> String {
    dim(d)
}

impl ser::SerializeTuple for Tuple<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.element(v)
    }
    fn end(self) -> R {
        self.finish()
    }
}
impl ser::SerializeTupleStruct for Tuple<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.element(v)
    }
    fn end(self) -> R {
        self.finish()
    }
}
impl ser::SerializeTupleVariant for Tuple<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, v: &T) -> R {
        self.element(v)
    }
    fn end(self) -> R {
        // The variant name was pushed in serialize_tuple_variant.
        if let Some(p) = self.w.path.rfind(':') {
            self.w.path.truncate(p);
        }
        self.w.last = Kind::Other;
        Ok(())
    }
}

pub struct Struct<'a> {
    w: &'a mut Walker,
    restore: usize,
}

impl ser::SerializeStruct for Struct<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> R {
        self.w.with(&format!(".{key}"), |w| v.serialize(w))
    }
    fn end(self) -> R {
        self.w.path.truncate(self.restore);
        self.w.last = Kind::Other;
        Ok(())
    }
}
impl ser::SerializeStructVariant for Struct<'_> {
    type Ok = ();
    type Error = ShapeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, v: &T) -> R {
        self.w.with(&format!(".{key}"), |w| v.serialize(w))
    }
    fn end(self) -> R {
        self.w.path.truncate(self.restore);
        self.w.last = Kind::Other;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DMatrix;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct W {
        nq: usize,
        m: DMatrix<f64>,
        piv: Vec<usize>,
    }

    #[test]
    fn an_overflowing_matrix_is_refused() {
        // nrows * ncols = 2^64 + 4 wraps to the 4 stored numbers.
        let good = W {
            nq: 2,
            m: DMatrix::zeros(2, 2),
            piv: vec![0, 1],
        };
        let mut bytes = postcard::to_stdvec(&good).unwrap();
        // Layout: nq, then data len 4, 4 f64 (8 bytes each), nrows, ncols, piv.
        let at = 1 + 1 + 32;
        assert_eq!(&bytes[at..at + 2], &[2, 2]);
        let big_r = (1u64 << 62) + 1; // × 4 = 2^64 + 4 ≡ 4
        let mut enc = postcard::to_stdvec(&big_r).unwrap();
        enc.extend(postcard::to_stdvec(&4u64).unwrap());
        bytes.splice(at..at + 2, enc);
        let w: W = postcard::from_bytes(&bytes).expect("nalgebra accepts the wrapped product");
        assert_eq!(w.m.nrows(), (1usize << 62) + 1);
        let e = Shape::of(&w).unwrap_err();
        assert!(e.contains("holds 4 numbers"), "{e}");
    }

    #[test]
    fn sizes_are_compared_with_the_reference() {
        let r = W {
            nq: 3,
            m: DMatrix::zeros(3, 3),
            piv: vec![0, 2, 1],
        };
        let reference = Shape::of(&r).unwrap();
        assert_eq!(reference.largest(), 3);
        let same = Shape::of(&r).unwrap();
        same.check_against(&reference, 3, "t").unwrap();
        let c = W {
            nq: 3,
            m: DMatrix::zeros(1, 9),
            piv: vec![0, 2, 1],
        };
        let e = Shape::of(&c)
            .unwrap()
            .check_against(&reference, 3, "t")
            .unwrap_err();
        assert!(e.contains("matrix .m is 1x9"), "{e}");
        let c = W {
            nq: 3,
            m: DMatrix::zeros(3, 3),
            piv: vec![0, 7, 1],
        };
        let e = Shape::of(&c)
            .unwrap()
            .check_against(&reference, 3, "t")
            .unwrap_err();
        assert!(e.contains("index 7 in .piv[]"), "{e}");
        let c = W {
            nq: 4,
            m: DMatrix::zeros(3, 3),
            piv: vec![0, 1, 2],
        };
        let e = Shape::of(&c)
            .unwrap()
            .check_against(&reference, 3, "t")
            .unwrap_err();
        assert!(e.contains("dimension .nq = 4"), "{e}");
    }

    /// An index pattern that the reference has left empty (filled on first use) is bounded
    /// by the model's largest size, not by the empty length: a BDF state whose diagonal mass
    /// pattern had been made (pendulum_chain in absolute coordinates after an input jump)
    /// was refused by its own instance.
    #[test]
    fn a_pattern_the_reference_has_not_filled_is_only_bounded() {
        let r = W {
            nq: 3,
            m: DMatrix::zeros(3, 3),
            piv: vec![],
        };
        let reference = Shape::of(&r).unwrap();
        let c = W {
            nq: 3,
            m: DMatrix::zeros(3, 3),
            piv: vec![2, 0, 1],
        };
        Shape::of(&c)
            .unwrap()
            .check_against(&reference, 3, "t")
            .unwrap();
        let c = W {
            nq: 3,
            m: DMatrix::zeros(3, 3),
            piv: vec![2, 3, 1],
        };
        let e = Shape::of(&c)
            .unwrap()
            .check_against(&reference, 3, "t")
            .unwrap_err();
        assert!(e.contains("index 3 in .piv[]"), "{e}");
    }
}
