//! Unit tests of `cgroup`'s decisions and parsing (a file of their own: the module is long).

use super::*;

fn seen(procs: &[u32], root: bool, controllers: &[&str], subtree: &[&str]) -> Observed {
    Observed {
        mount: Some("/sys/fs/cgroup".into()),
        base: Some("/sys/fs/cgroup/grading.scope".into()),
        writable: true,
        controllers: controllers.iter().map(|s| s.to_string()).collect(),
        subtree: subtree.iter().map(|s| s.to_string()).collect(),
        procs: procs.to_vec(),
        is_root: root,
        ns_top: false,
        root_user: false,
    }
}

fn both() -> Vec<String> {
    vec!["memory".into(), "pids".into()]
}

#[test]
fn a_grader_alone_in_its_cgroup_moves_into_a_leaf_first() {
    let o = seen(&[42], false, &["cpu", "memory", "pids"], &[]);
    assert_eq!(decide(&o, 42), Decision::MoveSelf { enable: both() });
}

#[test]
fn the_root_cgroup_and_an_enabled_subtree_are_used_as_they_are() {
    let o = seen(&[1, 42, 77], true, &["memory", "pids"], &[]);
    assert_eq!(decide(&o, 42), Decision::Use { enable: both() });
    let o = seen(&[1, 42], false, &["memory", "pids"], &["memory", "pids"]);
    assert_eq!(decide(&o, 42), Decision::Use { enable: vec![] });
    let o = seen(&[1, 42], false, &["memory", "pids"], &["pids"]);
    assert!(matches!(decide(&o, 42), Decision::Shared(_)));
}

#[test]
fn without_controllers_worker_cgroups_still_give_cgroup_kill() {
    // A hybrid host: memory and pids are cgroup v1's.
    let o = seen(&[1, 42], true, &["hugetlb"], &[]);
    assert_eq!(decide(&o, 42), Decision::Use { enable: vec![] });
    let o = seen(&[1, 42], false, &[], &[]);
    assert_eq!(decide(&o, 42), Decision::Use { enable: vec![] });
}

#[test]
fn a_shared_or_closed_cgroup_is_reported_with_the_way_out() {
    let o = seen(&[7, 42], false, &["memory", "pids"], &[]);
    let Decision::Shared(why) = decide(&o, 42) else {
        panic!("shared cgroup used");
    };
    assert!(why.contains("other processes"), "{why}");
    assert!(
        !why.contains("grading.scope"),
        "a path in a report line: {why}"
    );
    assert!(why.contains("Delegate=yes"), "{why}");
    let closed = Observed {
        writable: false,
        ..seen(&[42], false, &["memory", "pids"], &[])
    };
    let Decision::Unavailable(why) = decide(&closed, 42) else {
        panic!("closed cgroup used");
    };
    assert!(why.contains("did not delegate"), "{why}");
    assert!(matches!(
        decide(&Observed::default(), 42),
        Decision::Unavailable(_)
    ));
}

#[test]
fn root_at_the_top_of_a_container_moves_the_others_into_a_leaf() {
    let container = Observed {
        ns_top: true,
        root_user: true,
        ..seen(&[1, 42], false, &["memory", "pids"], &[])
    };
    assert_eq!(decide(&container, 42), Decision::MoveAll { enable: both() });
    // Not root, or a cgroup below the namespace's top (a host's login scope): shared.
    for o in [
        Observed {
            root_user: false,
            ..container.clone()
        },
        Observed {
            ns_top: false,
            ..container.clone()
        },
    ] {
        assert!(matches!(decide(&o, 42), Decision::Shared(_)), "{o:?}");
    }
}

#[test]
fn the_mount_and_our_cgroup_are_found() {
    let info = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n\
                31 25 0:27 / /proc rw - proc proc rw\n";
    let (mount, root) = cgroup2_mount(info).unwrap();
    assert_eq!(
        (mount.as_path(), root.as_str()),
        (Path::new("/sys/fs/cgroup"), "/")
    );
    let hybrid = "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    assert_eq!(
        cgroup2_mount(hybrid).unwrap().0,
        Path::new("/sys/fs/cgroup/unified")
    );
    assert!(cgroup2_mount("31 25 0:27 / /proc rw - proc proc rw\n").is_none());
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("a/b")).unwrap();
    assert_eq!(
        own_dir("4:memory:/x\n0::/a/b\n", d.path(), "/").unwrap(),
        d.path().join("a/b")
    );
    assert_eq!(own_dir("0::/\n", d.path(), "/").unwrap(), d.path());
    assert!(own_dir("4:memory:/x\n", d.path(), "/").is_none());
}

#[test]
fn memory_max_leaves_room_above_the_data_limit_and_the_scratch() {
    let p = Policy::worker("/tmp/w", false);
    assert_eq!(memory_max(&p), (8u64 << 30) + (1 << 30) + (2 << 30));
}
