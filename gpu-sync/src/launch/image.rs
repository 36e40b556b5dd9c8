//! Module images, checked before `cuModuleLoadData` sees them.
//!
//! `cuModuleLoadData` takes a pointer and no length: the driver finds the end
//! of the image from the image itself — a fatbin header's size, an ELF
//! file's header, section and segment tables, or the NUL that ends PTX text.
//! So a slice whose own headers claim more bytes than it holds (or PTX
//! without a NUL) would be read past its end. [`validate`] checks every size
//! the driver follows against the slice's length, so that what the driver
//! reads lies inside the slice; what the bytes *mean* inside it is the
//! driver's to reject (`CUDA_ERROR_INVALID_IMAGE`).
//!
//! Formats (all little-endian, as on every CUDA host):
//! - **fatbin**: `u32` magic `0xBA55ED50`, `u16` version, `u16` header
//!   size, `u64` size of the entries that follow the header. Each entry:
//!   `u16` kind, `u16` version, `u32` entry-header size, `u64` payload size,
//!   then the payload; an uncompressed cubin payload is itself checked as an
//!   ELF file.
//! - **ELF cubin** (64-bit): the ELF header, program headers, section
//!   headers, each section's and segment's file range, and the string tables
//!   names are read from (NUL-terminated inside their section, every name
//!   offset inside its table).
//! - **PTX**: text up to a NUL byte inside the slice.
//!
//! No unsafe code.

/// What kind of image passed [`validate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageKind {
    /// A fatbin (`0xBA55ED50`).
    Fatbin,
    /// An ELF cubin.
    Elf,
    /// NUL-terminated PTX text.
    Ptx,
}

/// The fatbin header magic (little-endian `u32`).
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const ELF_MAGIC: [u8; 4] = *b"\x7fELF";
const FATBIN_HEADER: usize = 16;
const FATBIN_ENTRY_HEADER: usize = 16;
const ELF64_HEADER: usize = 64;
const ELF64_PHDR: usize = 56;
const ELF64_SHDR: usize = 64;
const ELF64_SYM: usize = 24;
const SHT_SYMTAB: u32 = 2;
const SHT_STRTAB: u32 = 3;
const SHT_NOBITS: u32 = 8;
const SHT_DYNSYM: u32 = 11;

/// Checks that every byte the driver reads of `image` lies inside it.
///
/// # Errors
/// A message naming the format and the size that does not fit, or that the
/// bytes are no known format.
pub(crate) fn validate(image: &[u8]) -> Result<ImageKind, String> {
    if image.is_empty() {
        return Err("empty module image".into());
    }
    if image.len() >= 4 && u32_at(image, 0) == Some(FATBIN_MAGIC) {
        fatbin(image)?;
        return Ok(ImageKind::Fatbin);
    }
    if image.starts_with(&ELF_MAGIC) {
        elf(image).map_err(|e| format!("ELF cubin: {e}"))?;
        return Ok(ImageKind::Elf);
    }
    match image.iter().position(|&b| b == 0) {
        Some(0) => Err("PTX image is empty (it starts with its terminating NUL)".into()),
        Some(nul) => match std::str::from_utf8(&image[..nul]) {
            Ok(_) => Ok(ImageKind::Ptx),
            Err(e) => Err(format!("PTX text before the NUL is not UTF-8: {e}")),
        },
        None => Err(format!(
            "not a fatbin, cubin or NUL-terminated PTX image ({} bytes, no fatbin or ELF magic and no \
             NUL byte: PTX must end with a NUL inside the slice; use Module::load_ptx with a &CStr)",
            image.len()
        )),
    }
}

fn fatbin(image: &[u8]) -> Result<(), String> {
    let len = image.len();
    if len < FATBIN_HEADER {
        return Err(format!("fatbin: {len} bytes, shorter than its {FATBIN_HEADER}-byte header"));
    }
    let header = usize::from(u16_at(image, 6).unwrap_or(0));
    let fat = u64_at(image, 8).unwrap_or(u64::MAX);
    if header < FATBIN_HEADER {
        return Err(format!("fatbin: header size {header} is below the {FATBIN_HEADER} bytes it holds"));
    }
    let total = span(header as u64, fat).filter(|&end| end <= len).ok_or_else(|| {
        format!("fatbin: header ({header} bytes) + entries ({fat} bytes) exceed the {len}-byte slice")
    })?;
    let mut at = header;
    while at < total {
        let entry = &image[at..total];
        if entry.len() < FATBIN_ENTRY_HEADER {
            return Err(format!(
                "fatbin: entry at byte {at} has {} bytes left, fewer than its {FATBIN_ENTRY_HEADER}-byte header",
                entry.len()
            ));
        }
        let entry_header = u32_at(entry, 4).unwrap_or(0) as usize;
        let payload = u64_at(entry, 8).unwrap_or(u64::MAX);
        if entry_header < FATBIN_ENTRY_HEADER {
            return Err(format!("fatbin: entry at byte {at} declares a {entry_header}-byte header"));
        }
        let end = span(entry_header as u64, payload).filter(|&end| end <= entry.len()).ok_or_else(|| {
            format!(
                "fatbin: entry at byte {at} (header {entry_header} + payload {payload} bytes) runs past the \
                 {}-byte fatbin",
                total
            )
        })?;
        let body = &entry[entry_header..end];
        // An uncompressed cubin is read as an ELF file; compressed payloads
        // carry their own sizes and are bounded by `payload`.
        if body.starts_with(&ELF_MAGIC) {
            elf(body).map_err(|e| format!("fatbin: the cubin of the entry at byte {at}: {e}"))?;
        }
        at += end;
    }
    Ok(())
}

fn elf(image: &[u8]) -> Result<(), String> {
    let len = image.len();
    if len < ELF64_HEADER {
        return Err(format!("{len} bytes, shorter than the {ELF64_HEADER}-byte ELF64 header"));
    }
    match (image[4], image[5]) {
        (2, 1) => {}
        (class, data) => {
            return Err(format!(
                "class {class}, data encoding {data}: only 64-bit little-endian cubins are supported"
            ));
        }
    }
    let field16 = |at: usize| usize::from(u16_at(image, at).unwrap_or(0));
    let (phoff, shoff) = (u64_at(image, 0x20).unwrap_or(u64::MAX), u64_at(image, 0x28).unwrap_or(u64::MAX));
    let (phentsize, phnum) = (field16(0x36), field16(0x38));
    let (shentsize, shnum, shstrndx) = (field16(0x3A), field16(0x3C), field16(0x3E));

    if phnum > 0 {
        if phentsize < ELF64_PHDR {
            return Err(format!("program header entries of {phentsize} bytes (ELF64 needs {ELF64_PHDR})"));
        }
        table(len, phoff, phnum, phentsize, "program header table")?;
        for i in 0..phnum {
            let at = phoff as usize + i * phentsize;
            let (offset, filesz) = (u64_at(image, at + 8), u64_at(image, at + 32));
            let fits = offset.zip(filesz).and_then(|(o, s)| span(o, s)).is_some_and(|end| end <= len);
            if !fits {
                return Err(format!(
                    "segment {i} ({offset:?} + {filesz:?} bytes) runs past the {len}-byte image"
                ));
            }
        }
    }

    if shoff == 0 {
        return Ok(());
    }
    if shnum == 0 {
        return Err("extended section numbering (e_shnum 0 with a section table) is not supported".into());
    }
    if shentsize < ELF64_SHDR {
        return Err(format!("section header entries of {shentsize} bytes (ELF64 needs {ELF64_SHDR})"));
    }
    table(len, shoff, shnum, shentsize, "section header table")?;
    let sections: Vec<Section> =
        (0..shnum).map(|i| Section::at(image, shoff as usize + i * shentsize)).collect();
    for (i, s) in sections.iter().enumerate() {
        if s.kind != SHT_NOBITS && span(s.offset, s.size).is_none_or(|end| end > len) {
            return Err(format!(
                "section {i} ({} + {} bytes) runs past the {len}-byte image",
                s.offset, s.size
            ));
        }
    }
    // Names are read from string tables up to a NUL: each table must end
    // with one, and each name start inside it.
    for (i, s) in sections.iter().enumerate() {
        if s.kind == SHT_STRTAB && s.size > 0 && image[(s.offset + s.size - 1) as usize] != 0 {
            return Err(format!("string table (section {i}) does not end with a NUL"));
        }
    }
    if shstrndx != 0 {
        let names = sections
            .get(shstrndx)
            .filter(|s| s.kind == SHT_STRTAB)
            .ok_or_else(|| format!("section name table index {shstrndx} is not a string table"))?;
        if let Some((i, s)) = sections.iter().enumerate().find(|(_, s)| u64::from(s.name) >= names.size) {
            return Err(format!(
                "section {i}'s name offset {} is outside its {}-byte name table",
                s.name, names.size
            ));
        }
    }
    for (i, s) in sections.iter().enumerate().filter(|(_, s)| matches!(s.kind, SHT_SYMTAB | SHT_DYNSYM)) {
        let strings = sections
            .get(s.link as usize)
            .filter(|t| t.kind == SHT_STRTAB)
            .ok_or_else(|| format!("symbol table (section {i}) links to {}, not a string table", s.link))?;
        if (s.entsize as usize) < ELF64_SYM {
            return Err(format!(
                "symbol table (section {i}) has {}-byte entries (ELF64 needs {ELF64_SYM})",
                s.entsize
            ));
        }
        for k in 0..(s.size / s.entsize) as usize {
            let name = u32_at(image, s.offset as usize + k * s.entsize as usize).unwrap_or(u32::MAX);
            if u64::from(name) >= strings.size {
                return Err(format!(
                    "symbol {k} of section {i}: name offset {name} is outside its {}-byte string table",
                    strings.size
                ));
            }
        }
    }
    Ok(())
}

/// One ELF64 section header, as far as the checks need it.
struct Section {
    name: u32,
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    entsize: u64,
}

impl Section {
    /// The header at byte `at` (inside the image: [`table`] checked it).
    fn at(image: &[u8], at: usize) -> Section {
        Section {
            name: u32_at(image, at).unwrap_or(u32::MAX),
            kind: u32_at(image, at + 4).unwrap_or(0),
            offset: u64_at(image, at + 24).unwrap_or(u64::MAX),
            size: u64_at(image, at + 32).unwrap_or(u64::MAX),
            link: u32_at(image, at + 40).unwrap_or(u32::MAX),
            entsize: u64_at(image, at + 56).unwrap_or(0),
        }
    }
}

/// Checks that a table of `n` entries of `size` bytes at `offset` lies
/// inside `len` bytes.
fn table(len: usize, offset: u64, n: usize, size: usize, what: &str) -> Result<(), String> {
    let bytes = (n as u64).saturating_mul(size as u64);
    if span(offset, bytes).is_some_and(|end| end <= len) {
        Ok(())
    } else {
        Err(format!("{what} ({n} entries of {size} bytes at {offset}) runs past the {len}-byte image"))
    }
}

/// `offset + size` as a `usize`, if it does not overflow.
fn span(offset: u64, size: u64) -> Option<usize> {
    offset.checked_add(size).and_then(|end| usize::try_from(end).ok())
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal valid ELF64 cubin-shaped file: header, a name table, a
    /// string table, a symbol table, and the section header table.
    fn elf_file() -> Vec<u8> {
        let shstr = b"\0.shstrtab\0.strtab\0.symtab\0".to_vec();
        let strtab = b"\0kernel\0".to_vec();
        let mut sym = vec![0u8; 2 * ELF64_SYM];
        sym[ELF64_SYM..ELF64_SYM + 4].copy_from_slice(&1u32.to_le_bytes()); // "kernel"
        let mut f = vec![0u8; ELF64_HEADER];
        f[..4].copy_from_slice(&ELF_MAGIC);
        f[4] = 2; // 64-bit
        f[5] = 1; // little-endian
        let shstr_off = f.len() as u64;
        f.extend_from_slice(&shstr);
        let str_off = f.len() as u64;
        f.extend_from_slice(&strtab);
        while !f.len().is_multiple_of(8) {
            f.push(0);
        }
        let sym_off = f.len() as u64;
        f.extend_from_slice(&sym);
        let shoff = f.len() as u64;
        // (name, type, offset, size, link, entsize)
        let sections: [(u32, u32, u64, u64, u32, u64); 4] = [
            (0, 0, 0, 0, 0, 0),
            (1, SHT_STRTAB, shstr_off, shstr.len() as u64, 0, 0),
            (11, SHT_STRTAB, str_off, strtab.len() as u64, 0, 0),
            (19, SHT_SYMTAB, sym_off, sym.len() as u64, 2, ELF64_SYM as u64),
        ];
        for (name, kind, offset, size, link, entsize) in sections {
            let mut h = [0u8; ELF64_SHDR];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[56..64].copy_from_slice(&entsize.to_le_bytes());
            f.extend_from_slice(&h);
        }
        f[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        f[0x3A..0x3C].copy_from_slice(&(ELF64_SHDR as u16).to_le_bytes());
        f[0x3C..0x3E].copy_from_slice(&4u16.to_le_bytes());
        f[0x3E..0x40].copy_from_slice(&1u16.to_le_bytes());
        f
    }

    /// A fatbin holding `payload` as one entry (kind 2, an ELF).
    fn fatbin_of(payload: &[u8]) -> Vec<u8> {
        let entry_header = 64u32;
        let fat = u64::from(entry_header) + payload.len() as u64;
        let mut f = Vec::new();
        f.extend_from_slice(&FATBIN_MAGIC.to_le_bytes());
        f.extend_from_slice(&1u16.to_le_bytes());
        f.extend_from_slice(&(FATBIN_HEADER as u16).to_le_bytes());
        f.extend_from_slice(&fat.to_le_bytes());
        let mut e = vec![0u8; entry_header as usize];
        e[0..2].copy_from_slice(&2u16.to_le_bytes());
        e[4..8].copy_from_slice(&entry_header.to_le_bytes());
        e[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        f.extend_from_slice(&e);
        f.extend_from_slice(payload);
        f
    }

    fn set_u64(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn ptx_needs_a_nul_inside_the_slice() {
        assert_eq!(validate(b"//\0"), Ok(ImageKind::Ptx));
        assert_eq!(validate(b".version 8.0\n\0trailing"), Ok(ImageKind::Ptx));
        for bad in [&b"//"[..], b".version 8.0", b"\0", b"\xff\xfe\0", b""] {
            assert!(validate(bad).is_err(), "{bad:?}");
        }
        let e = validate(b"//").err().unwrap_or_default();
        assert!(e.contains("not a fatbin, cubin or NUL-terminated PTX image"), "{e}");
    }

    #[test]
    fn a_well_formed_elf_and_fatbin_pass() {
        let elf = elf_file();
        assert_eq!(validate(&elf), Ok(ImageKind::Elf));
        assert_eq!(validate(&fatbin_of(&elf)), Ok(ImageKind::Fatbin));
        // Bytes after the declared image are never read and do not matter.
        let mut longer = fatbin_of(&elf);
        longer.extend_from_slice(&[0xAB; 40]);
        assert_eq!(validate(&longer), Ok(ImageKind::Fatbin));
    }

    #[test]
    fn every_truncation_of_a_binary_image_is_refused() {
        let elf = elf_file();
        let fat = fatbin_of(&elf);
        for cut in 1..elf.len() {
            assert!(validate(&elf[..cut]).is_err(), "ELF cut at {cut} of {}", elf.len());
        }
        for cut in 4..fat.len() {
            assert!(validate(&fat[..cut]).is_err(), "fatbin cut at {cut} of {}", fat.len());
        }
    }

    #[test]
    fn sizes_that_point_outside_are_refused() {
        let elf = elf_file();
        let shoff = u64_at(&elf, 0x28).unwrap_or(0) as usize;
        let at_section = |i: usize| shoff + i * ELF64_SHDR;
        let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
        let mut e = elf.clone();
        set_u64(&mut e, 0x28, u64::MAX - 8); // e_shoff overflowing
        cases.push(("section header table", e));
        let mut e = elf.clone();
        set_u64(&mut e, at_section(2) + 32, 1 << 40); // .strtab size
        cases.push(("section 2", e));
        let mut e = elf.clone();
        let s = at_section(2) + 24;
        let last = u64_at(&e, s).unwrap_or(0) + 7; // .strtab loses its last NUL
        e[last as usize] = b'x';
        cases.push(("does not end with a NUL", e));
        let mut e = elf.clone();
        let sym = u64_at(&e, at_section(3) + 24).unwrap_or(0) as usize + ELF64_SYM;
        e[sym..sym + 4].copy_from_slice(&1000u32.to_le_bytes()); // symbol name
        cases.push(("symbol 1 of section 3", e));
        let mut e = elf.clone();
        e[at_section(1)..at_section(1) + 4].copy_from_slice(&999u32.to_le_bytes()); // section name
        cases.push(("section 1's name offset", e));
        // One segment, its header appended; a segment of 16 bytes fits, one
        // of 1 MiB does not.
        let with_segment = |filesz: u64| {
            let mut e = elf.clone();
            let ph = e.len() as u64;
            let mut h = [0u8; ELF64_PHDR];
            h[0..4].copy_from_slice(&1u32.to_le_bytes()); // PT_LOAD
            h[8..16].copy_from_slice(&16u64.to_le_bytes());
            h[32..40].copy_from_slice(&filesz.to_le_bytes());
            e.extend_from_slice(&h);
            set_u64(&mut e, 0x20, ph);
            e[0x36..0x38].copy_from_slice(&(ELF64_PHDR as u16).to_le_bytes());
            e[0x38..0x3A].copy_from_slice(&1u16.to_le_bytes());
            e
        };
        assert_eq!(validate(&with_segment(16)), Ok(ImageKind::Elf));
        cases.push(("segment 0", with_segment(1 << 20)));
        let mut e = elf.clone();
        e[4] = 1; // 32-bit
        cases.push(("64-bit little-endian", e));
        let mut f = fatbin_of(&elf);
        let n = f.len() as u64;
        set_u64(&mut f, 8, n); // fat size one header too long
        cases.push(("exceed the", f));
        let mut f = fatbin_of(&elf);
        set_u64(&mut f, FATBIN_HEADER + 8, elf.len() as u64 + 1); // entry payload
        cases.push(("runs past the", f));
        let mut f = fatbin_of(&elf);
        let inner = FATBIN_HEADER + 64 + 0x28;
        set_u64(&mut f, inner, 1 << 30); // the nested cubin's section table
        cases.push(("the cubin of the entry at byte 16", f));
        for (what, image) in cases {
            match validate(&image) {
                Err(e) => assert!(e.contains(what), "expected {what:?}, got {e:?}"),
                Ok(kind) => panic!("{what}: passed as {kind:?}"),
            }
        }
    }
}
