//! `sqlx::migrate!` embeds the migrations at compile time, but on stable Rust it cannot tell
//! Cargo to watch their folder: without this, a new migration reaches the binary only when
//! some source file changes too.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
