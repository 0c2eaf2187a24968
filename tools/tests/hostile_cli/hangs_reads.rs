//! Hostile-input cases of class 3-5. hangs, unbounded reads and files cut short (see `../hostile_cli.rs`).

use super::*;

/// Adds this class's cases to `c`.
pub fn cases(c: &mut Corpus) {
    let dir = c.dir.clone();
    let dir = dir.as_path();
    let q2 = c.q2.clone();
    let text = c.text.clone();
    let out = c.out.clone();
    // ---- 3. hangs: iteration counts, non-regular files, threads
    let sinkhorn = gguf_variant(dir, "sinkhorn.gguf", |_, w| {
        w.set_kv(
            "deepseek4.hyper_connection.sinkhorn_iterations",
            Value::U32(1 << 31),
        )
        .unwrap()
    });
    c.add(
        "3 hangs",
        "2^31 Sinkhorn iterations",
        run(&sinkhorn),
        err(&["sinkhorn_iterations"]),
    );
    let fifo = mkfifo(&dir.join("fifo"));
    c.add("3 hangs", "FIFO as the model", run(&fifo), err(&["FIFO"]));
    c.add(
        "3 hangs",
        "FIFO as the prompt file",
        s(&["run", "-n", "1", "-t", "1", "-f", &fifo]),
        err(&["FIFO"]),
    );
    c.add(
        "3 hangs",
        "FIFO as kl's text",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &fifo,
            "--base-config",
            "none",
            "--test-config",
            "none",
        ]),
        err(&["FIFO"]),
    );
    c.add(
        "3 hangs",
        "FIFO as inspect's file",
        s(&["inspect", &fifo]),
        err(&["FIFO"]),
    );
    c.add(
        "3 hangs",
        "FIFO as --base-config",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-config",
            &fifo,
            "--test-config",
            "none",
            "-t",
            "1",
        ]),
        err(&["FIFO"]),
    );
    c.add(
        "3 hangs",
        "FIFO as --moe-config (rejected, run goes on)",
        with(run(&q2), &["--moe-config", &fifo]),
        ran(&["rejected", "FIFO"]),
    );
    for victim in [
        "config.json",
        "model.safetensors.index.json",
        "model-00002-of-00002.safetensors",
    ] {
        let d = ckpt_variant(dir, &format!("ck-fifo-{victim}"), |d| {
            std::fs::remove_file(d.join(victim)).unwrap();
            mkfifo(&d.join(victim));
        });
        c.add(
            "3 hangs",
            &format!("FIFO as checkpoint {victim}"),
            with(logits(&d), &[&out]),
            err(&["FIFO", victim]),
        );
    }
    c.add(
        "3 hangs",
        "a directory as the prompt file",
        s(&["run", "-n", "1", "-t", "1", "-f", dir.to_str().unwrap()]),
        err(&["directory"]),
    );
    c.add(
        "3 hangs",
        "-t 100000",
        s(&["run", "-n", "2", "-t", "100000", "--temp", "0"]),
        ran(&["note: -t 100000"]),
    );

    // ---- 4. unbounded reads
    c.add(
        "4 reads",
        "-f /dev/zero",
        s(&["run", "-n", "1", "-t", "1", "-f", "/dev/zero"]),
        err(&["character device"]),
    );
    c.add(
        "4 reads",
        "-f /dev/urandom",
        s(&["run", "-n", "1", "-t", "1", "-f", "/dev/urandom"]),
        err(&["character device"]),
    );
    c.add(
        "4 reads",
        "/dev/zero as the model",
        run("/dev/zero"),
        err(&["character device"]),
    );
    let zlink = dir.join("moe-link.toml");
    std::os::unix::fs::symlink("/dev/zero", &zlink).unwrap();
    c.add(
        "4 reads",
        "MoE config linked to /dev/zero (rejected, run goes on)",
        with(run(&q2), &["--moe-config", zlink.to_str().unwrap()]),
        ran(&["rejected", "character device"]),
    );
    c.add(
        "4 reads",
        "--base-logits /dev/zero",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-logits",
            "/dev/zero",
            "--test-config",
            "none",
            "-t",
            "1",
        ]),
        err(&["character device"]),
    );
    let big_prompt = dir.join("big.txt");
    std::fs::File::create(&big_prompt)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    c.add(
        "4 reads",
        "a 300 MiB prompt file",
        s(&[
            "run",
            "-n",
            "1",
            "-t",
            "1",
            "-f",
            big_prompt.to_str().unwrap(),
        ]),
        err(&["MiB at most"]),
    );
    let big_cfg = ckpt_variant(dir, "ck-big-config", |d| {
        std::fs::File::create(d.join("config.json"))
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
    });
    c.add(
        "4 reads",
        "a 64 MiB config.json",
        with(logits(&big_cfg), &[&out]),
        err(&["config.json", "MiB at most"]),
    );
    let big_base = dir.join("big-base.st");
    std::fs::File::create(&big_base)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    c.add(
        "4 reads",
        "a 2 GiB --base-logits file",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-logits",
            big_base.to_str().unwrap(),
            "--test-config",
            "none",
            "-t",
            "1",
        ]),
        err(&["MiB at most"]),
    );

    // ---- 5. files cut short (the while-mapped cases are `changed_while_mapped` below)
    let src = std::fs::read(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    for (cut, name) in [
        (20usize, "GGUF cut in its header"),
        (5000, "GGUF cut in its metadata"),
        (src.len() - 1000, "GGUF cut in its data"),
    ] {
        let p = dir.join(format!("cut-{cut}.gguf"));
        std::fs::write(&p, &src[..cut]).unwrap();
        c.add(
            "5 truncated",
            name,
            run(p.to_str().unwrap()),
            err(&["cut-"]),
        );
    }
    let cut_shard = ckpt_variant(dir, "ck-cut", |d| {
        let p = d.join("model-00001-of-00002.safetensors");
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    });
    c.add(
        "5 truncated",
        "checkpoint shard cut in half",
        with(logits(&cut_shard), &[&out]),
        err(&["model-00001-of-00002.safetensors"]),
    );
}
