//! The timeline SVG as a PNG (feature `png`): resvg, pure Rust, with the
//! machine's fonts for the labels.

use crate::error::{Error, Result};

/// Families tried, in order, for the SVG's `sans-serif`.
const SANS: [&str; 5] = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial", "Helvetica"];

/// Rasterizes `svg` at its own size.
///
/// Labels need a sans-serif font on the machine (one of DejaVu Sans,
/// Liberation Sans, Noto Sans, Arial, Helvetica; else the first family
/// found); without any font the boxes are drawn and the text left out.
///
/// # Errors
/// [`Error::Render`] for an SVG resvg cannot parse, or a size it cannot
/// allocate.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>> {
    let mut opt = resvg::usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    let families: Vec<String> = db.faces().flat_map(|f| f.families.iter().map(|(n, _)| n.clone())).collect();
    if let Some(f) = SANS
        .iter()
        .find(|s| families.iter().any(|n| n == *s))
        .map(|s| (*s).to_owned())
        .or_else(|| families.first().cloned())
    {
        db.set_sans_serif_family(f);
    }
    let tree = resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| Error::Render(format!("SVG: {e}")))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| Error::Render(format!("a {}x{} image", size.width(), size.height())))?;
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| Error::Render(format!("PNG: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Source, Trace};

    #[test]
    fn a_trace_renders_to_a_png_of_the_svgs_size() {
        let t = Trace::new(Source::Events);
        let svg = t.svg("empty");
        let png = svg_to_png(&svg).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big-endian, at bytes 16..24.
        let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
        assert_eq!(w, 1600);
        assert!(svg_to_png("<svg").is_err());
    }
}
