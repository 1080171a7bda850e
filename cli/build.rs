// A position-dependent executable: a PIE's ~15 000 relative relocations
// cost about 1 ms at every start, which is most of detrun's own start-up.
fn main() {
    println!("cargo:rustc-link-arg-bins=-no-pie");
}
