//! Files stay usable from both sides: commands run as the workspace's owner, so what they
//! create belongs to that user on the host, and what the host puts there they can edit.

use std::os::unix::fs::{MetadataExt, chown};

use pretty_assertions::assert_eq;

use super::support::{Env, policy, run};

#[tokio::test(flavor = "multi_thread")]
async fn files_are_shared_between_the_host_user_and_the_container() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    let ws = sandbox.workspace().path().to_owned();
    let me = std::fs::metadata(&ws).unwrap();

    let out = run(&*sandbox, "id -u; id -g; echo made > made.txt").await;
    assert_eq!(out.output, format!("{}\n{}\n", me.uid(), me.gid()));
    let made = std::fs::metadata(ws.join("made.txt")).unwrap();
    assert_eq!((made.uid(), made.gid()), (me.uid(), me.gid()));
    // The host edits what the container made…
    std::fs::write(ws.join("made.txt"), "edited on the host\n").unwrap();
    // …and the container edits what the host made.
    std::fs::write(ws.join("host.txt"), "from the host\n").unwrap();
    let out = run(
        &*sandbox,
        "cat made.txt; echo more >> host.txt && cat host.txt",
    )
    .await;
    assert_eq!(out.output, "edited on the host\nfrom the host\nmore\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_run_as_whoever_owns_the_workspace() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    let ws = sandbox.workspace().path().to_owned();
    if !nix_is_root() {
        // Only root can hand the workspace to another user; as anyone else the test above
        // already covers "the owner is the current user".
        eprintln!(
            "not root: cannot chown the workspace to another user; covered by the test above"
        );
        return;
    }
    chown(&ws, Some(4321), Some(4322)).unwrap();
    let out = run(&*sandbox, "id -u; id -g; echo x > theirs.txt").await;
    assert_eq!(out.output, "4321\n4322\n");
    let theirs = std::fs::metadata(ws.join("theirs.txt")).unwrap();
    assert_eq!((theirs.uid(), theirs.gid()), (4321, 4322));
}

fn nix_is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}
