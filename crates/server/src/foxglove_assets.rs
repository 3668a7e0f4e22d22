//! `--foxglove-assets DIR`: the files a Foxglove session's `fetchAsset`
//! may read (`rosgate_core::hub::AssetSource`; the protocol side is
//! `crates/core/src/hub/foxglove_assets.rs`).
//!
//! - `package://PKG/path` is `DIR/PKG/path` (DIR stands for the share
//!   directories a ROS install would search: one directory per package);
//! - `file:///abs/path` is served only when the path is inside DIR;
//! - any other scheme is refused.
//!
//! Invariants: a served file is a regular file whose real path (symbolic
//! links resolved, `std::fs::canonicalize`) lies inside DIR's real path:
//! `..` components are refused before any lookup, and a link leading out
//! of DIR is refused after; a file over the size limit is refused from
//! its metadata, and read with the limit as a bound (a file growing
//! meanwhile cannot make the read larger). The read blocks the loop for
//! the file's time: assets are local, at most
//! `rosgate_core::hub::MAX_FOXGLOVE_ASSET_BYTES`, and asked for once
//! when a scene loads.

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use rosgate_core::hub::AssetSource;

/// The directory `fetchAsset` serves, resolved once at start.
#[derive(Debug)]
pub struct DirAssets {
    root: PathBuf,
}

impl DirAssets {
    /// `dir` as its real path; an error when it is not a directory.
    pub fn new(dir: &Path) -> std::io::Result<DirAssets> {
        let root = std::fs::canonicalize(dir)?;
        if !root.is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        Ok(DirAssets { root })
    }

    /// The path `uri` names under the root, before links are resolved.
    fn locate(&self, uri: &str) -> Result<PathBuf, String> {
        let rel = if let Some(rest) = uri.strip_prefix("package://") {
            let (pkg, path) = rest
                .split_once('/')
                .ok_or_else(|| format!("{uri}: package://PKG/path names no file"))?;
            if pkg.is_empty() || path.is_empty() {
                return Err(format!("{uri}: package://PKG/path names no file"));
            }
            PathBuf::from(pkg).join(path)
        } else if let Some(path) = uri.strip_prefix("file://") {
            let p = Path::new(path);
            if !p.is_absolute() {
                return Err(format!("{uri}: a file:// URI needs an absolute path"));
            }
            // Taken apart below like a package path: only its place under
            // the root counts, checked on the real path.
            return self.check_components(uri, p).map(|_| p.to_path_buf());
        } else {
            return Err(format!(
                "{uri}: only package:// and file:// URIs are served"
            ));
        };
        self.check_components(uri, &rel)?;
        Ok(self.root.join(rel))
    }

    /// Refuses `..` anywhere (and a leading `.`; `Path::components` drops
    /// the others, which name the same place).
    fn check_components(&self, uri: &str, p: &Path) -> Result<(), String> {
        for c in p.components() {
            match c {
                Component::Normal(_) | Component::RootDir => {}
                Component::ParentDir | Component::CurDir | Component::Prefix(_) => {
                    return Err(format!("{uri}: a path with . or .. is not served"));
                }
            }
        }
        Ok(())
    }
}

impl AssetSource for DirAssets {
    fn fetch(&self, uri: &str, max: usize) -> Result<Vec<u8>, String> {
        let path = self.locate(uri)?;
        let real = std::fs::canonicalize(&path).map_err(|e| format!("{uri}: {e}"))?;
        if !real.starts_with(&self.root) {
            return Err(format!("{uri}: outside the assets directory"));
        }
        let file = File::open(&real).map_err(|e| format!("{uri}: {e}"))?;
        let meta = file.metadata().map_err(|e| format!("{uri}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("{uri}: not a file"));
        }
        if meta.len() > max as u64 {
            return Err(format!(
                "{uri}: {} bytes, over the limit of {max}",
                meta.len()
            ));
        }
        let mut out = Vec::with_capacity(meta.len() as usize);
        file.take(max as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| format!("{uri}: {e}"))?;
        if out.len() > max {
            return Err(format!("{uri}: over the limit of {max} bytes"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rosgate-assets-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn serves_package_and_file_uris_inside_the_directory_only() {
        let top = scratch("serve");
        let root = top.join("share");
        std::fs::create_dir_all(root.join("robot/meshes")).unwrap();
        std::fs::write(root.join("robot/meshes/base.stl"), b"solid").unwrap();
        std::fs::write(top.join("secret"), b"key").unwrap();
        let a = DirAssets::new(&root).unwrap();
        assert_eq!(
            a.fetch("package://robot/meshes/base.stl", 100).unwrap(),
            b"solid"
        );
        let real = std::fs::canonicalize(root.join("robot/meshes/base.stl")).unwrap();
        assert_eq!(
            a.fetch(&format!("file://{}", real.display()), 100).unwrap(),
            b"solid"
        );
        let secret = std::fs::canonicalize(top.join("secret")).unwrap();
        for uri in [
            "package://robot/../../secret".to_owned(),
            "package://../secret".to_owned(),
            format!("file://{}", secret.display()),
            "file://relative/x".to_owned(),
            "http://example.com/x".to_owned(),
            "package://robot".to_owned(),
            "package://robot/meshes".to_owned(),
            "package://robot/missing.stl".to_owned(),
        ] {
            assert!(a.fetch(&uri, 100).is_err(), "{uri} served");
        }
        // A link leading out of the directory is refused; one inside is not.
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(top.join("secret"), root.join("robot/out")).unwrap();
            std::os::unix::fs::symlink(
                root.join("robot/meshes/base.stl"),
                root.join("robot/in.stl"),
            )
            .unwrap();
            let e = a.fetch("package://robot/out", 100).unwrap_err();
            assert!(e.contains("outside"), "{e}");
            assert_eq!(a.fetch("package://robot/in.stl", 100).unwrap(), b"solid");
        }
        // Over the limit: refused, naming the size.
        let e = a.fetch("package://robot/meshes/base.stl", 4).unwrap_err();
        assert!(e.contains("5 bytes"), "{e}");
        std::fs::remove_dir_all(&top).unwrap();
    }

    #[test]
    fn the_directory_must_exist() {
        assert!(DirAssets::new(Path::new("/nonexistent/rosgate/assets")).is_err());
    }
}
