//! Command line (being written).
pub fn main() -> i32 {
    0
}
