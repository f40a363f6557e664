use super::*;

#[test]
fn module_outputs_replace_ko_by_btf() {
    assert_eq!(module_output_name("kernel/net/fou.ko"), "kernel/net/fou.btf");
    assert_eq!(module_output_name("extra/x.ko.debug"), "extra/x.btf");
}

#[test]
fn shards_from_flag_slurm_and_indexed_jobs() {
    let none = |_: &str| None;
    assert_eq!(resolve_shard(Some("2/5"), None, &none).unwrap(), (2, 5));
    assert!(resolve_shard(Some("5/5"), None, &none).is_err());
    assert!(resolve_shard(Some("0/0"), None, &none).is_err());
    assert!(resolve_shard(Some("x"), None, &none).is_err());
    assert_eq!(resolve_shard(None, None, &none).unwrap(), (0, 1));
    let slurm = |k: &str| match k {
        "SLURM_ARRAY_TASK_ID" => Some("11".into()),
        "SLURM_ARRAY_TASK_MIN" => Some("10".into()),
        "SLURM_ARRAY_TASK_COUNT" => Some("3".into()),
        _ => None,
    };
    assert_eq!(resolve_shard(None, None, &slurm).unwrap(), (1, 3));
    // the flag wins over the environment
    assert_eq!(resolve_shard(Some("0/2"), None, &slurm).unwrap(), (0, 2));
    let k8s = |k: &str| match k {
        "JOB_COMPLETION_INDEX" => Some("3".into()),
        "BTFKIT_SHARD_COUNT" => Some("4".into()),
        _ => None,
    };
    assert_eq!(resolve_shard(None, None, &k8s).unwrap(), (3, 4));
    assert_eq!(resolve_shard(None, Some(8), &k8s).unwrap(), (3, 8));
    let k8s_no_count = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "0".to_string());
    assert!(resolve_shard(None, None, &k8s_no_count).is_err());
}

#[test]
fn shards_partition_the_list() {
    let entries: Vec<ListEntry> = (0..7)
        .map(|i| ListEntry {
            path: format!("/x/{i}").into(),
            name: i.to_string(),
        })
        .collect();
    let mut all: Vec<String> = (0..3)
        .flat_map(|k| shard_entries(&entries, k, 3))
        .map(|e| e.name)
        .collect();
    assert_eq!(shard_entries(&entries, 1, 3).len(), 2);
    all.sort();
    assert_eq!(all, (0..7).map(|i| i.to_string()).collect::<Vec<_>>());
}

#[test]
fn list_names_and_duplicates() {
    let d = std::env::temp_dir().join(format!("btfkit-kernel-list-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let l = d.join("list");
    std::fs::write(
        &l,
        "# c\n\na/linux-image-6.1-dbg_6.1_amd64.deb\n/abs/tree/\n  b.rpm  \n",
    )
    .unwrap();
    let (e, _) = read_list(&l).unwrap();
    let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["linux-image-6.1-dbg_6.1_amd64", "tree", "b"]);
    assert_eq!(e[0].path, d.join("a/linux-image-6.1-dbg_6.1_amd64.deb"));
    std::fs::write(&l, "x/k.deb\ny/k.ddeb\n").unwrap();
    let err = read_list(&l).unwrap_err().to_string();
    assert!(
        err.contains("x/k.deb") && err.contains("y/k.ddeb") && err.contains("`k`"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_torn_last_line_is_dropped_others_are_reported() {
    let d = std::env::temp_dir().join(format!("btfkit-kernel-report-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("report.jsonl");
    let t = Totals::default();
    let good = serde_json::to_string(&Line::Summary { summary: t }).unwrap();
    std::fs::write(&p, format!("{good}\n{{bad\n{good}\n{{\"inp")).unwrap();
    let (lines, bad) = read_report(&p).unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(bad, [2]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn flags_are_canonical() {
    let mut a = Options::default();
    a.features.apply_list("var,encode_force");
    a.lang = LangFilter::Exclude(vec![0x1c, 0x1c]);
    let mut b = Options::default();
    b.features.apply_list("encode_force");
    b.features.apply_list("var");
    b.lang = LangFilter::Exclude(vec![0x1c]);
    assert_eq!(flags_string(&a), flags_string(&b));
    assert!(flags_string(&a).starts_with("btf_features=encode_force,var lang_exclude=0x1c"));
}

#[test]
fn fingerprint_of_bytes_and_file_agree() {
    let data: Vec<u8> = include_bytes!("../../../data/multi_types.gcc-O2.ld-r.o").to_vec();
    let d = std::env::temp_dir().join(format!("btfkit-kernel-fp-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("m.ko");
    std::fs::write(&p, &data).unwrap();
    let f = Input::file(p, "m.ko".into(), InputKind::Module, "modules/m.btf".into()).unwrap();
    let b = Input::bytes(
        "m.ko".into(),
        InputKind::Module,
        "modules/m.btf".into(),
        f.mtime,
        data.into(),
    );
    assert_eq!(f.fingerprint().unwrap(), b.fingerprint().unwrap());
    let other = Input {
        mtime: f.mtime + 1,
        ..b.clone()
    };
    assert_ne!(other.fingerprint().unwrap(), b.fingerprint().unwrap());
    let _ = std::fs::remove_dir_all(&d);
}
