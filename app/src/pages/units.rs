//! How the endpoint pages write times and sizes.

/// `4.2 ms`, `180 ms`, `1.25 s`; above the last bucket `> 30 s`; `—` without requests.
pub fn latency_text(q: Option<(f64, bool)>) -> String {
    match q {
        None => "—".into(),
        Some((ms, true)) => format!("> {}", latency_text(Some((ms, false)))),
        Some((ms, false)) if ms < 10.0 => format!("{ms:.1} ms"),
        Some((ms, false)) if ms < 1000.0 => format!("{ms:.0} ms"),
        Some((ms, false)) => format!("{:.2} s", ms / 1000.0),
    }
}

/// `512 B`, `3.4 KiB`, `12.0 MiB`, `1.50 GiB`.
pub fn bytes_text(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let x = n as f64;
    if x < KIB {
        format!("{n} B")
    } else if x < KIB * KIB {
        format!("{:.1} KiB", x / KIB)
    } else if x < KIB * KIB * KIB {
        format!("{:.1} MiB", x / (KIB * KIB))
    } else {
        format!("{:.2} GiB", x / (KIB * KIB * KIB))
    }
}
