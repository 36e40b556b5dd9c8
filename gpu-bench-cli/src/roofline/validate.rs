//! Replay and `--peers` files checked before anything is drawn: every
//! figure finite and non-negative, every peer in one of the schema's units,
//! each refusal naming the field (`ceilings[2].value ("HBM read")`). A
//! negative or NaN figure would otherwise render as a negative rate.

use gpu_bench::roofline::{Peer, RooflineReport};

/// The units a peer's figure may be in.
pub const PEER_UNITS: [&str; 2] = ["B/s", "FLOP/s"];

fn figure(field: &str, v: f64) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        return Ok(());
    }
    Err(format!("{field} is {v}: expected a finite number, at least 0"))
}

fn opt(field: &str, v: Option<f64>) -> Result<(), String> {
    v.map_or(Ok(()), |v| figure(field, v))
}

/// An intensity or ridge: non-negative, infinite allowed (a kernel that
/// moves no bytes; the schema writes it as `null`), never NaN.
fn ratio(field: &str, v: f64) -> Result<(), String> {
    if v.is_nan() || v < 0.0 {
        return Err(format!("{field} is {v}: expected a number at least 0 (or null for infinite)"));
    }
    Ok(())
}

/// Each peer's value finite and non-negative, its unit one of
/// [`PEER_UNITS`].
///
/// # Errors
/// The first bad field, named (`peers[1].value ("torch sum")`).
pub fn peers(list: &[Peer]) -> Result<(), String> {
    for (i, p) in list.iter().enumerate() {
        figure(&format!("peers[{i}].value ({:?})", p.name), p.value)?;
        if !PEER_UNITS.contains(&p.unit.as_str()) {
            return Err(format!(
                "peers[{i}].unit ({:?}) is {:?}: expected one of {}",
                p.name,
                p.unit,
                PEER_UNITS.join(", ")
            ));
        }
    }
    Ok(())
}

/// Every figure of a saved report finite and non-negative (intensities and
/// ridges may be infinite), its peers as [`peers`].
///
/// # Errors
/// The first bad field, named.
pub fn report(r: &RooflineReport) -> Result<(), String> {
    opt("idle_clock_mhz", r.idle_clock_mhz)?;
    for (i, c) in r.ceilings.iter().enumerate() {
        let f = |x: &str| format!("ceilings[{i}].{x} ({:?})", c.name);
        figure(&f("value"), c.value)?;
        figure(&f("noise"), c.noise)?;
        opt(&f("datasheet"), c.datasheet)?;
        opt(&f("sm_clock_mhz"), c.sm_clock_mhz)?;
        opt(&f("peak_at_clock"), c.peak_at_clock)?;
    }
    for (i, s) in r.sweeps.iter().enumerate() {
        for (j, p) in s.points.iter().enumerate() {
            let f = |x: &str| format!("sweeps[{i}].points[{j}].{x} ({:?})", s.name);
            figure(&f("x"), p.x)?;
            figure(&f("y"), p.y)?;
            opt(&f("y2"), p.y2)?;
        }
        for (j, p) in s.plateaus.iter().enumerate() {
            let f = |x: &str| format!("sweeps[{i}].plateaus[{j}].{x} ({:?})", s.name);
            figure(&f("from_x"), p.from_x)?;
            figure(&f("to_x"), p.to_x)?;
            figure(&f("value"), p.value)?;
        }
        if let Some(ridge) = s.ridge {
            ratio(&format!("sweeps[{i}].ridge ({:?})", s.name), ridge)?;
        }
    }
    for (i, p) in r.placements.iter().enumerate() {
        let f = |x: &str| format!("placements[{i}].{x} ({:?})", p.name);
        figure(&f("seconds"), p.seconds)?;
        ratio(&f("intensity"), p.intensity)?;
        figure(&f("achieved_flops"), p.achieved_flops)?;
        figure(&f("achieved_bytes"), p.achieved_bytes)?;
        figure(&f("roof"), p.roof)?;
        figure(&f("pct_of_roof"), p.pct_of_roof)?;
        ratio(&f("ridge"), p.ridge)?;
    }
    for (i, p) in r.phases.iter().enumerate() {
        figure(&format!("phases[{i}].seconds ({:?})", p.name), p.seconds)?;
    }
    for (i, t) in r.tuning.iter().enumerate() {
        figure(&format!("tuning[{i}].value ({:?})", t.probe), t.value)?;
    }
    peers(&r.peers)
}

/// Fields a saved report may hold as `null`: optional figures, and the
/// intensities and ridges written as `null` for infinite.
const MAY_BE_NULL: [&str; 9] = [
    "datasheet",
    "sm_clock_mhz",
    "peak_at_clock",
    "y2",
    "ridge",
    "intensity",
    "idle_clock_mhz",
    "driver_version",
    "tensor_path",
];

/// The path of the first `null` in `v` where the schema wants a number (a
/// NaN or infinity written by another tool), for a parse error that would
/// otherwise not name its field.
pub fn null_figure(v: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match v {
        Value::Object(m) => m.iter().find_map(|(k, x)| match x {
            Value::Null if !MAY_BE_NULL.contains(&k.as_str()) => Some(format!("{at}{k}")),
            _ => null_figure(x, &format!("{at}{k}.")),
        }),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| {
            let at = format!("{}[{i}].", at.trim_end_matches('.'));
            match x {
                Value::Null => Some(at.trim_end_matches('.').to_owned()),
                _ => null_figure(x, &at),
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(value: f64, unit: &str) -> Peer {
        Peer { name: "torch sum".into(), value, unit: unit.into() }
    }

    #[test]
    fn bad_peers_are_refused_with_the_field_named() {
        assert!(peers(&[peer(3e12, "B/s"), peer(1e15, "FLOP/s")]).is_ok());
        let e = peers(&[peer(3e12, "B/s"), peer(-1.0, "B/s")]).unwrap_err();
        assert!(e.starts_with("peers[1].value (\"torch sum\") is -1"), "{e}");
        assert!(peers(&[peer(f64::NAN, "B/s")]).unwrap_err().contains("finite"));
        assert!(peers(&[peer(f64::INFINITY, "B/s")]).unwrap_err().contains("finite"));
        let e = peers(&[peer(1.0, "GB/s")]).unwrap_err();
        assert!(e.contains("peers[0].unit") && e.contains("B/s, FLOP/s"), "{e}");
    }

    #[test]
    fn a_null_figure_is_found_by_its_path() {
        let v = serde_json::json!({"ceilings": [{"value": 1.0, "datasheet": null}, {"value": null}]});
        assert_eq!(null_figure(&v, "").as_deref(), Some("ceilings[1].value"));
        let v = serde_json::json!({"placements": [{"ridge": null, "intensity": null}]});
        assert_eq!(null_figure(&v, ""), None);
    }
}
