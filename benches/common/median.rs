//! The median of a benchmark's runs, for the benches that run one process
//! per run. Include it with `#[path = "common/median.rs"] mod median;`.

/// The middle value of `values` (the upper middle of an even count).
pub fn median<T: PartialOrd + Copy>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    values[values.len() / 2]
}
