//! PNG line plots of simulation results without a plotting crate: a small RGB canvas, a 5×7
//! bitmap font (HD44780 style) for labels, and a PNG encoder (flate2 + crc32fast).

use super::{CliError, CliResult};
use std::path::Path;

/// 5×7 glyphs for ASCII 32..=126; each row's 5 low bits, bit 4 = leftmost column.
const FONT: [[u8; 7]; 95] = [
    [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    [0x04, 0x04, 0x04, 0x04, 0x00, 0x00, 0x04],
    [0x0A, 0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00],
    [0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A],
    [0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04],
    [0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03],
    [0x0C, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0D],
    [0x0C, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00],
    [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02],
    [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08],
    [0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00],
    [0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00],
    [0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08],
    [0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00],
    [0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C],
    [0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00],
    [0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E],
    [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
    [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F],
    [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
    [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02],
    [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
    [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E],
    [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
    [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E],
    [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C],
    [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00],
    [0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x04, 0x08],
    [0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02],
    [0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00],
    [0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08],
    [0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04],
    [0x0E, 0x11, 0x01, 0x0D, 0x15, 0x15, 0x0E],
    [0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11],
    [0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E],
    [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E],
    [0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C],
    [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
    [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10],
    [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F],
    [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11],
    [0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
    [0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C],
    [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
    [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F],
    [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11],
    [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11],
    [0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
    [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
    [0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D],
    [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11],
    [0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E],
    [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
    [0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E],
    [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04],
    [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A],
    [0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11],
    [0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04],
    [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
    [0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E],
    [0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00],
    [0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E],
    [0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00],
    [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F],
    [0x08, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00],
    [0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F],
    [0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E],
    [0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E],
    [0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F],
    [0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E],
    [0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08],
    [0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E],
    [0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11],
    [0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E],
    [0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C],
    [0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12],
    [0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E],
    [0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11],
    [0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11],
    [0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E],
    [0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10],
    [0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01],
    [0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10],
    [0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E],
    [0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06],
    [0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D],
    [0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04],
    [0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A],
    [0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11],
    [0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E],
    [0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F],
    [0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02],
    [0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
    [0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08],
    [0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00],
];

pub type Rgb = [u8; 3];
const BLACK: Rgb = [30, 30, 30];
const GRID: Rgb = [225, 228, 235];
const COLORS: [Rgb; 6] = [
    [31, 119, 180],
    [214, 39, 40],
    [44, 160, 44],
    [255, 127, 14],
    [148, 103, 189],
    [140, 86, 75],
];

pub struct Canvas {
    pub w: usize,
    pub h: usize,
    pub rgb: Vec<u8>,
}

impl Canvas {
    pub fn new(w: usize, h: usize) -> Canvas {
        Canvas {
            w,
            h,
            rgb: vec![255; w * h * 3],
        }
    }

    #[cfg(test)]
    pub fn get(&self, x: usize, y: usize) -> Rgb {
        let i = (y * self.w + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    pub fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.w && (y as usize) < self.h {
            let i = (y as usize * self.w + x as usize) * 3;
            self.rgb[i..i + 3].copy_from_slice(&c);
        }
    }

    pub fn fill(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb) {
        for y in y0..=y1 {
            for x in x0..=x1 {
                self.set(x, y, c);
            }
        }
    }

    /// Bresenham line, `width` pixels thick (square pen).
    pub fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), width: i64, c: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        let lo = -(width - 1) / 2;
        let hi = width / 2;
        loop {
            self.fill(x + lo, y + lo, x + hi, y + hi, c);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Text with its top-left corner at (x, y); `scale` pixels per font dot.
    pub fn text(&mut self, x: i64, y: i64, s: &str, scale: i64, c: Rgb) {
        for (i, ch) in s.chars().enumerate() {
            let code = ch as u32;
            let glyph = if (32..=126).contains(&code) {
                FONT[(code - 32) as usize]
            } else {
                FONT[('?' as u32 - 32) as usize]
            };
            let gx = x + i as i64 * 6 * scale;
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..5 {
                    if bits & (0x10 >> col) != 0 {
                        self.fill(
                            gx + col * scale,
                            y + row as i64 * scale,
                            gx + col * scale + scale - 1,
                            y + row as i64 * scale + scale - 1,
                            c,
                        );
                    }
                }
            }
        }
    }

    pub fn text_width(s: &str, scale: i64) -> i64 {
        (s.chars().count() as i64 * 6 - 1).max(0) * scale
    }

    /// PNG (8-bit RGB, no interlace).
    pub fn png(&self) -> Vec<u8> {
        use std::io::Write;
        let mut raw = Vec::with_capacity((self.w * 3 + 1) * self.h);
        for row in self.rgb.chunks(self.w * 3) {
            raw.push(0); // filter: none
            raw.extend_from_slice(row);
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&raw).expect("writing to memory");
        let idat = z.finish().expect("writing to memory");
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut chunk = |kind: &[u8], data: &[u8]| {
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut h = crc32fast::Hasher::new();
            h.update(kind);
            h.update(data);
            out.extend_from_slice(kind);
            out.extend_from_slice(data);
            out.extend_from_slice(&h.finalize().to_be_bytes());
        };
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&(self.w as u32).to_be_bytes());
        ihdr.extend_from_slice(&(self.h as u32).to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(b"IHDR", &ihdr);
        chunk(b"IDAT", &idat);
        chunk(b"IEND", &[]);
        out
    }
}

/// Tick positions covering [lo, hi] with a 1-2-5 step, about `n` of them.
pub fn ticks(lo: f64, hi: f64, n: usize) -> (Vec<f64>, f64) {
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    ((first..=last).map(|k| k as f64 * step).collect(), step)
}

/// A tick label with as many decimals as the step needs.
pub fn tick_label(x: f64, step: f64) -> String {
    let a = x.abs().max(step);
    if !(1e-3..1e6).contains(&a) {
        return format!("{x:.1e}");
    }
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let s = format!("{x:.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

/// One panel per series (stacked, shared time axis). `series` are `(label, values)` sampled at
/// `t`.
pub fn plot(t: &[f64], series: &[(String, Vec<f64>)], title: &str) -> Canvas {
    let (w, panel_h, top, bottom, left, right) =
        (1000usize, 190usize, 44usize, 64usize, 120i64, 30i64);
    let n = series.len().max(1);
    let h = top + n * panel_h + bottom;
    let mut c = Canvas::new(w, h);
    c.text(left, 14, title, 2, BLACK);
    let (t0, t1) = match (t.first(), t.last()) {
        (Some(&a), Some(&b)) if b > a => (a, b),
        (Some(&a), _) => (a, a + 1.0),
        _ => (0.0, 1.0),
    };
    let x_of =
        |x: f64| left + ((x - t0) / (t1 - t0) * (w as i64 - left - right) as f64).round() as i64;
    let (xt, xstep) = ticks(t0, t1, 8);
    for (k, (label, ys)) in series.iter().enumerate() {
        let py0 = (top + k * panel_h) as i64 + 8;
        let py1 = (top + (k + 1) * panel_h) as i64 - 12;
        let finite: Vec<f64> = ys.iter().copied().filter(|y| y.is_finite()).collect();
        let (mut lo, mut hi) = finite
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &y| {
                (a.min(y), b.max(y))
            });
        if !lo.is_finite() {
            (lo, hi) = (-1.0, 1.0);
        }
        if hi - lo <= 1e-12 * hi.abs().max(lo.abs()).max(1e-300) {
            let pad = if lo == 0.0 { 1.0 } else { 0.1 * lo.abs() };
            (lo, hi) = (lo - pad, hi + pad);
        }
        let pad = 0.05 * (hi - lo);
        let (lo, hi) = (lo - pad, hi + pad);
        let y_of = |y: f64| py1 - ((y - lo) / (hi - lo) * (py1 - py0) as f64).round() as i64;
        let (yt, ystep) = ticks(lo, hi, 5);
        for &y in &yt {
            let py = y_of(y);
            c.line((left, py), (w as i64 - right, py), 1, GRID);
            let l = tick_label(y, ystep);
            c.text(left - 8 - Canvas::text_width(&l, 2), py - 7, &l, 2, BLACK);
        }
        for &x in &xt {
            c.line((x_of(x), py0), (x_of(x), py1), 1, GRID);
        }
        c.line((left, py0), (left, py1), 1, BLACK);
        c.line((left, py1), (w as i64 - right, py1), 1, BLACK);
        let color = COLORS[k % COLORS.len()];
        let mut prev: Option<(i64, i64)> = None;
        for (&x, &y) in t.iter().zip(ys) {
            if !y.is_finite() {
                prev = None;
                continue;
            }
            let p = (x_of(x), y_of(y));
            if let Some(q) = prev {
                c.line(q, p, 2, color);
            } else {
                c.fill(p.0, p.1, p.0, p.1, color);
            }
            prev = Some(p);
        }
        c.text(left + 10, py0 + 4, label, 2, color);
    }
    let base = (top + n * panel_h) as i64 - 12;
    for &x in &xt {
        let l = tick_label(x, xstep);
        c.line((x_of(x), base), (x_of(x), base + 4), 1, BLACK);
        c.text(
            x_of(x) - Canvas::text_width(&l, 2) / 2,
            base + 8,
            &l,
            2,
            BLACK,
        );
    }
    let xl = "time [s]";
    c.text(
        (w as i64 - Canvas::text_width(xl, 2)) / 2,
        base + 30,
        xl,
        2,
        BLACK,
    );
    c
}

pub fn write_plot(file: &Path, t: &[f64], series: &[(String, Vec<f64>)], title: &str) -> CliResult {
    std::fs::write(file, plot(t, series, title).png())
        .map_err(|e| CliError::User(format!("{}: cannot write: {e}", file.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_nice_and_cover_the_range() {
        let (t, s) = ticks(0.0, 10.0, 5);
        assert_eq!(s, 2.0);
        assert_eq!(t, vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let (t, s) = ticks(-0.013, 0.042, 5);
        assert_eq!(s, 0.02);
        assert_eq!(t.len(), 3);
        assert_eq!(tick_label(0.04, 0.02), "0.04");
        assert_eq!(tick_label(-0.0, 0.02), "0.00");
        assert_eq!(tick_label(2e7, 1e7), "2.0e7");
    }

    #[test]
    fn line_is_drawn_where_the_data_is() {
        // y = t on [0, 1]: the midpoint of the data must be painted in the series colour.
        let t: Vec<f64> = (0..=100).map(|i| i as f64 / 100.0).collect();
        let c = plot(&t, &[("y".into(), t.clone())], "test");
        let mut painted = 0;
        for y in 0..c.h {
            for x in 0..c.w {
                if c.get(x, y) == COLORS[0] {
                    painted += 1;
                }
            }
        }
        assert!(painted > 500, "{painted}");
        // The data's middle (t = 0.5) maps to the panel's horizontal and vertical middle
        // (symmetric 5 % padding): some pixel within 2 px is the line colour.
        let (left, right, top, ph) = (120i64, 30i64, 44i64, 190i64);
        let xm = left + (1000 - left - right) / 2;
        let ym = ((top + 8) + (top + ph - 12)) / 2;
        let near = (-2..=2).any(|dx| {
            (-2..=2).any(|dy| c.get((xm + dx) as usize, (ym + dy) as usize) == COLORS[0])
        });
        assert!(near);
    }

    #[test]
    fn png_is_well_formed() {
        use std::io::Read;
        let mut c = Canvas::new(3, 2);
        c.set(1, 1, [10, 20, 30]);
        let png = c.png();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 3);
        assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 2);
        let idat_len = u32::from_be_bytes(png[33..37].try_into().unwrap()) as usize;
        assert_eq!(&png[37..41], b"IDAT");
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&png[41..41 + idat_len])
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(raw.len(), 2 * (1 + 9));
        assert_eq!(&raw[10 + 1 + 3..10 + 1 + 6], &[10, 20, 30]);
        assert!(png.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]));
    }
}
