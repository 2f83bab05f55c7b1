//! Unit tests of `cgroup`: finding candidate cgroups from `/proc/self/cgroup` and
//! `/proc/self/mountinfo` texts.

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
