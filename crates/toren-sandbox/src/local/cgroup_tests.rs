//! Unit tests of `cgroup`: finding candidate cgroups from `/proc/self/cgroup` and
//! `/proc/self/mountinfo` texts, and (where a cgroup is writable) per-call names that no
//! process of another PID namespace, nor a leftover, can collide with.

use super::*;

fn parent(version: Version, dir: &str) -> Parent {
    Parent {
        version,
        dir: PathBuf::from(dir),
    }
}

#[test]
fn a_pure_v2_host_offers_its_own_cgroup_for_both_controllers() {
    let own = "0::/user.slice/user-1000.slice/session-2.scope\n";
    let mounts = "35 24 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
    let dir = "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope";
    assert_eq!(
        candidates(own, mounts),
        vec![
            (Controller::Pids, parent(Version::V2, dir)),
            (Controller::Memory, parent(Version::V2, dir)),
        ]
    );
}

#[test]
fn v1_hierarchies_are_found_per_controller_below_the_mount_root() {
    // In a container the hierarchies are mounted at the container's own cgroup.
    let own = "9:pids:/docker/abc\n4:memory:/docker/abc/job\n0::/\n";
    let mounts = "\
39 31 0:36 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
40 31 0:39 /docker/ab /sys/fs/cgroup/elsewhere rw - cgroup cgroup rw,pids
35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/un\\040ified rw - cgroup2 cgroup2 rw
";
    assert_eq!(
        candidates(own, mounts),
        vec![
            (
                Controller::Pids,
                parent(Version::V2, "/sys/fs/cgroup/un ified")
            ),
            (Controller::Pids, parent(Version::V1, "/sys/fs/cgroup/pids")),
            (
                Controller::Memory,
                parent(Version::V2, "/sys/fs/cgroup/un ified")
            ),
            (
                Controller::Memory,
                parent(Version::V1, "/sys/fs/cgroup/memory/job")
            ),
        ]
    );
}

#[test]
fn no_cgroup_mounts_means_no_candidates() {
    let own = "0::/\n";
    let mounts = "22 1 0:21 / /proc rw - proc proc rw\n";
    assert_eq!(candidates(own, mounts), vec![]);
}

/// A writable parent cgroup of this host, if there is one.
fn writable_parent() -> Option<PathBuf> {
    let cgroups = Cgroups::probe();
    let parent = cgroups.pids.or(cgroups.memory)?;
    Some(parent.dir)
}

#[test]
fn a_name_left_by_a_killed_process_with_our_pid_is_skipped() {
    let Some(dir) = writable_parent() else {
        println!("not applicable here: no writable cgroup");
        return;
    };
    // What a killed process with our pid (in another PID namespace, or earlier) left.
    let next = NEXT_CALL.load(Ordering::Relaxed);
    let taken = dir.join(format!(
        "toren-{}-{}-{next}",
        std::process::id(),
        pid_namespace()
    ));
    fs::create_dir(&taken).unwrap();
    let created = CallCgroup::create(&Cgroups::probe(), 16, 64 << 20);
    let _ = fs::remove_dir(&taken);
    let (call, _procs) = created.unwrap();
    assert!(call.dirs.iter().all(|(_, d)| *d != taken), "{call:?}");
}

#[test]
fn stale_cgroups_of_other_pid_namespaces_are_left_alone_until_old() {
    let Some(dir) = writable_parent() else {
        println!("not applicable here: no writable cgroup");
        return;
    };
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let own = dir.join(format!("toren-{dead}-{}-1", pid_namespace()));
    let foreign = dir.join(format!("toren-{dead}-4026599999-1"));
    let foreign_old = dir.join(format!("toren-{dead}-4026599999-2"));
    for d in [&own, &foreign, &foreign_old] {
        fs::create_dir(d).unwrap();
    }
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    File::open(&foreign_old)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    remove_stale(&dir);
    let left = [own.exists(), foreign.exists(), foreign_old.exists()];
    for d in [&own, &foreign, &foreign_old] {
        let _ = fs::remove_dir(d);
    }
    assert_eq!(
        left,
        [false, true, false],
        "removed: a dead process's of our namespace, and an hour-old one of another; kept: \
         a fresh one of another namespace, where pid {dead} may live"
    );
}
