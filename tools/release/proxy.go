package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// treeFiles lists the files a commit of the tree at root would hold,
// slash-separated: in a Git work tree, the tracked files and the untracked
// ones Git does not ignore (a build's leftovers stay out of the zips, as
// they stay out of a tag); elsewhere every regular file.
func treeFiles(ctx context.Context, root string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
		cmd := exec.CommandContext(ctx, "git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-files: %w: %s", err, stderr.Bytes())
		}
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f == "" {
				continue
			}
			// A tracked file deleted in the work tree would not be committed.
			if fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(f))); err == nil && fi.Mode().IsRegular() {
				files = append(files, f)
			}
		}
		slices.Sort(files)
		return files, nil
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// snapshot copies the files a commit of root would hold into dst.
func snapshot(ctx context.Context, root, dst string) error {
	files, err := treeFiles(ctx, root)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := copyFile(filepath.Join(root, filepath.FromSlash(f)), filepath.Join(dst, filepath.FromSlash(f))); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm()|0o200)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(out, in)
	return err
}

// writeProxy adds the modules mods of the tree at root, at version v, to
// the file-based module proxy in dir (the layout GOPROXY=file://dir reads,
// go.dev/ref/mod#goproxy-protocol). The zips hold the files of a commit of
// the tree, by the go command's rules: a module's zip leaves out its
// sub-modules and vendor directories, and keeps everything else, go.work,
// README.md and .ci/ included for the root module.
func writeProxy(ctx context.Context, root, dir string, mods []*modInfo, v string) error {
	snap, err := os.MkdirTemp("", "retrykit-snapshot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(snap)
	if err := snapshot(ctx, root, snap); err != nil {
		return err
	}
	for _, m := range mods {
		if err := addToProxy(filepath.Join(snap, filepath.FromSlash(m.Dir)), dir, m.Path, v); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
	}
	return nil
}

// addToProxy writes module path at version v, from the module directory
// src, into the proxy directory dir: its .info, .mod and .zip, and its
// version in the list.
func addToProxy(src, dir, path, v string) error {
	mv := module.Version{Path: path, Version: v}
	esc, err := module.EscapePath(path)
	if err != nil {
		return err
	}
	vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, v+".mod"), gomod, 0o644); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, v+".info"), info, 0o644); err != nil {
		return err
	}
	var z bytes.Buffer
	if err := zip.CreateFromDir(&z, mv, src); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(vdir, v+".zip"), z.Bytes(), 0o644); err != nil {
		return err
	}
	list := filepath.Join(vdir, "list")
	old, err := os.ReadFile(list)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if slices.Contains(strings.Fields(string(old)), v) {
		return nil
	}
	return os.WriteFile(list, append(old, v+"\n"...), 0o644)
}
