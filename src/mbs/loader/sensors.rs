//! Sensor outputs: relative position, velocity and acceleration of one marker with respect
//! to another, resolved along the axes of a chosen body (docs/model-format.md, *Outputs*).

use super::*;

impl Resolver<'_> {
    pub(super) fn relative_output(
        &mut self,
        o: &RawOutput,
        kname: &str,
        el: &str,
        sp: Range<usize>,
        present: &[(&'static str, Range<usize>)],
    ) -> Res<(OutputQuantity, &'static str)> {
        let what = format!("a {kname} output");
        self.allowed_keys(
            el,
            &what,
            present,
            &["body1", "point1", "body2", "point2", "frame", "component"],
        )?;
        let marker = |r: &mut Self,
                      body: &Option<S<String>>,
                      point: &Option<NumList>,
                      b: &str,
                      p: &str|
         -> Res<(BodyRef, Vector3<f64>)> {
            let bn = r.required(body, sp.clone(), el, b, &what)?;
            let body = r.body_ref(bn, el, b)?;
            let local = match point {
                Some(x) => {
                    let g = r.vec3(x, el, p)?;
                    r.local_point(body, g)
                }
                None => Vector3::zeros(),
            };
            Ok((body, local))
        };
        let (body1, point1) = marker(self, &o.body1, &o.point1, "body1", "point1")?;
        let (body2, point2) = marker(self, &o.body2, &o.point2, "body2", "point2")?;
        let frame = match &o.frame {
            Some(f) => {
                let b = self.body_ref(f, el, "frame")?;
                self.check_rigid(b, f.span(), el, &format!("the `frame` of {what}"))?;
                b
            }
            None => BodyRef::Ground,
        };
        let c = self.required(&o.component, sp.clone(), el, "component", &what)?;
        let component = self.component(c, el)?;
        let (order, unit) = match kname {
            "relative_position" => (0, "m"),
            "relative_velocity" => (1, "m/s"),
            _ => (2, "m/s2"),
        };
        Ok((
            OutputQuantity::Relative {
                order,
                body1,
                point1,
                body2,
                point2,
                frame,
                component,
            },
            unit,
        ))
    }
}
