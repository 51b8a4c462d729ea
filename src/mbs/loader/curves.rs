//! Characteristic curves from table files on rotational spring-dampers (`table`,
//! `damper_table`) and bushings (`tables = { x = …, rz = … }`, `damper_tables`): read, and refused where a
//! linear coefficient on the same component is also given (`mbs::curves` evaluates them).

use super::*;

/// Component names of a bushing's `tables`, in component order.
const AXES: [&str; 6] = ["x", "y", "z", "rx", "ry", "rz"];

impl Resolver<'_> {
    fn curve_table(&mut self, file: &S<String>, el: &str) -> Res<CurveTable> {
        let (file, x, y) = self.table_file(file, el)?;
        Ok(CurveTable { file, x, y })
    }

    /// `table` (spring torque against angle) and `damper_table` (damper torque against angular
    /// velocity) of a `rotational_spring_damper`; each replaces `stiffness` / `damping`, which
    /// must then not be given.
    pub(super) fn torsion_tables(
        &mut self,
        f: &RawForce,
        el: &str,
    ) -> Res<(Option<CurveTable>, Option<CurveTable>)> {
        let mut out = [None, None];
        let pairs = [
            (&f.table, &f.stiffness, "table", "stiffness"),
            (&f.damper_table, &f.damping, "damper_table", "damping"),
        ];
        for (k, (table, linear, tkey, lkey)) in pairs.into_iter().enumerate() {
            let Some(t) = table else { continue };
            if let Some(l) = linear {
                return Err(self.err(
                    l.span(),
                    el,
                    format!("give `{lkey}` (linear) or `{tkey}` (a curve), not both"),
                ));
            }
            out[k] = Some(self.curve_table(t, el)?);
        }
        let [spring, damper] = out;
        Ok((spring, damper))
    }

    /// A bushing's `tables`: per component a force-deflection (torque-angle) curve in place
    /// of that component's stiffness, which must then be absent or 0.
    pub(super) fn bushing_tables(
        &mut self,
        f: &RawForce,
        el: &str,
        stiffness: &[Scalar; 3],
        rot_stiffness: &[Scalar; 3],
    ) -> Res<[Option<CurveTable>; 6]> {
        let keys = ("tables", "stiffness", "rot_stiffness", "stiffness");
        self.axis_tables(f.tables.as_ref(), el, stiffness, rot_stiffness, keys)
    }

    /// A bushing's `damper_tables`: per component a force-velocity (torque-angular velocity)
    /// curve in place of that component's damping, which must then be absent or 0.
    pub(super) fn bushing_damper_tables(
        &mut self,
        f: &RawForce,
        el: &str,
        damping: &[Scalar; 3],
        rot_damping: &[Scalar; 3],
    ) -> Res<[Option<CurveTable>; 6]> {
        let keys = ("damper_tables", "damping", "rot_damping", "damping");
        self.axis_tables(f.damper_tables.as_ref(), el, damping, rot_damping, keys)
    }

    /// Per-component curves of `tables` / `damper_tables`; `keys` = (table key, translational
    /// coefficient key, rotational coefficient key, what the curve replaces).
    fn axis_tables(
        &mut self,
        tables: Option<&S<RawAxisTables>>,
        el: &str,
        linear: &[Scalar; 3],
        rot_linear: &[Scalar; 3],
        (tkey, key, rot_key, what): (&str, &str, &str, &str),
    ) -> Res<[Option<CurveTable>; 6]> {
        let mut out: [Option<CurveTable>; 6] = Default::default();
        let Some(tables) = tables else {
            return Ok(out);
        };
        for (k, entry) in tables.get_ref().by_component().into_iter().enumerate() {
            let Some(file) = entry else { continue };
            let (key, linear) = if k < 3 {
                (key, linear[k])
            } else {
                (rot_key, rot_linear[k - 3])
            };
            let given = match linear {
                Scalar::Const(x) => (x != 0.0).then(|| format!("{x}")),
                Scalar::Param(p) => Some(format!("parameter `{}`", self.params[p].name)),
            };
            if let Some(v) = given {
                return Err(self.err(
                    file.span(),
                    el,
                    format!(
                        "`{tkey}.{axis}` replaces the linear {what} of component {axis}, but `{key}` gives it {v} too: set that component of `{key}` to 0 or drop the table",
                        axis = AXES[k]
                    ),
                ));
            }
            out[k] = Some(self.curve_table(file, el)?);
        }
        Ok(out)
    }
}
