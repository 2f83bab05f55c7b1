//! Rebuilds the crate when a migration is added: `sqlx::migrate!` embeds
//! `migrations/sqlite`, but the compiler only notices changes to files it already knows.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
