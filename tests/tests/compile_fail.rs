//! Compile-fail cases: each file under `tests/ui/` is a misuse the types of
//! gpu-sync forbid, with the compiler's message next to it (`.stderr`).
//! Regenerate the messages with `TRYBUILD=overwrite cargo test -p sync-tests
//! --test compile_fail` after a deliberate change, and read the diff.

#[test]
fn misuse_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*.rs");
}
