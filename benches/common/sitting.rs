//! When and where a benchmark ran: the date, the commit and the machine,
//! for the results file it writes. Include it with
//! `#[path = "common/sitting.rs"] mod sitting;`.
#![allow(dead_code)]

use std::process::Command;

/// The checked-out commit (short), with "with local changes" if the tree
/// differs from it (results files aside, which benches rewrite); "unknown"
/// outside a git checkout.
pub fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(commit) => match git(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":!benches/results",
            ":!benches/RESULTS.md",
        ]) {
            Some(changes) if !changes.is_empty() => format!("{commit} with local changes"),
            _ => commit,
        },
        None => "unknown".to_owned(),
    }
}

/// Now, in UTC, to the minute.
pub fn date() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |out| String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        )
}

/// The CPU model and the number of logical CPUs.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split(':').nth(1))
        .map_or("unknown CPU", str::trim);
    let logical = std::thread::available_parallelism().map_or(1, usize::from);
    format!("{model}, {logical} logical CPUs")
}
