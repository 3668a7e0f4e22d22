//! `--auth-tokens FILE` and `--auth-roles FILE`: who may connect and what
//! each role may do (docs/security.md).
//!
//! Token file: one `ROLE TOKEN` per line; blank lines and `#` comments are
//! skipped. Roles file (YAML): a map from role name to a map from class
//! (`publish`, `subscribe`, `call`, `provide`, `action_send`,
//! `action_serve`, `param_read`, `param_write`, or rosbridge's
//! `topics_glob`, `topics_pub_glob`, `topics_sub_glob`, `services_glob`,
//! `params_glob`, and `actions_glob`) to a list of globs. A class a role does not name allows
//! nothing. Errors name the file and the line or the role, never a token.
//! Both files are read within the bounds of [`crate::files`].

use rosgate_core::access::{Class, RoleDef, TokenLine};
use yaml_rust2::Yaml;

/// Reads the token file, in file order.
pub fn load_tokens(path: &str) -> Result<Vec<TokenLine>, String> {
    let text = crate::files::read("--auth-tokens", path)?;
    parse_tokens(&text).map_err(|e| format!("--auth-tokens {path}: {e}"))
}

/// Parses a token file's text.
pub fn parse_tokens(text: &str) -> Result<Vec<TokenLine>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next(), parts.next()) {
            (Some(role), Some(token), None) => out.push(TokenLine {
                token: token.to_string(),
                role: role.to_string(),
                line: i + 1,
            }),
            _ => {
                return Err(format!(
                    "line {}: expected `ROLE TOKEN` (two fields separated by spaces)",
                    i + 1
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("no tokens (one `ROLE TOKEN` per line)".into());
    }
    Ok(out)
}

/// Reads the roles file.
pub fn load_roles(path: &str) -> Result<Vec<RoleDef>, String> {
    let text = crate::files::read("--auth-roles", path)?;
    parse_roles(&text).map_err(|e| format!("--auth-roles {path}: {e}"))
}

/// Parses a roles file's YAML text.
pub fn parse_roles(text: &str) -> Result<Vec<RoleDef>, String> {
    let docs = crate::files::yaml(text)?;
    let mut roles = Vec::new();
    for doc in &docs {
        let map = match doc {
            Yaml::Hash(m) => m,
            Yaml::Null => continue,
            _ => return Err("the top level must map role names to their allowlists".into()),
        };
        for (name, body) in map {
            let Some(name) = name.as_str() else {
                return Err("role names must be strings".into());
            };
            if roles.iter().any(|r: &RoleDef| r.name == name) {
                return Err(format!("role {name} defined twice"));
            }
            let mut role = RoleDef {
                name: name.to_string(),
                ..RoleDef::default()
            };
            match body {
                Yaml::Null => {}
                Yaml::Hash(classes) => {
                    for (key, globs) in classes {
                        let key = key.as_str().unwrap_or("");
                        let Some(targets) = Class::from_key(key) else {
                            return Err(format!(
                                "role {name}: unknown class {key:?} (publish, subscribe, call, provide, action_send, action_serve, param_read, param_write, or rosbridge's topics_glob, topics_pub_glob, topics_sub_glob, services_glob, params_glob, and actions_glob)"
                            ));
                        };
                        let list = globs_of(globs)
                            .ok_or_else(|| format!("role {name}: {key} must be a list of globs"))?;
                        for &c in targets {
                            role.globs[c as usize].extend(list.iter().cloned());
                        }
                    }
                }
                _ => return Err(format!("role {name}: expected a map of classes to globs")),
            }
            roles.push(role);
        }
    }
    Ok(roles)
}

/// A list of strings, or one string (rosbridge writes `"['/a', '/b']"` as
/// a single string too: that form is parsed as such a list).
fn globs_of(y: &Yaml) -> Option<Vec<String>> {
    match y {
        Yaml::Array(a) => a.iter().map(|g| g.as_str().map(str::to_string)).collect(),
        Yaml::String(s) => {
            let t = s.trim();
            match t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                Some(inner) => Some(
                    inner
                        .split(',')
                        .map(|g| g.trim().trim_matches(|c| c == '\'' || c == '"').to_string())
                        .filter(|g| !g.is_empty())
                        .collect(),
                ),
                None => Some(vec![t.to_string()]),
            }
        }
        Yaml::Null => Some(Vec::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lines() {
        let t = parse_tokens("# ops\n\nadmin  0123456789abcdef0\n viewer\tfedcba98765432100 \n")
            .expect("ok");
        let got: Vec<(&str, &str, usize)> = t
            .iter()
            .map(|l| (l.token.as_str(), l.role.as_str(), l.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("0123456789abcdef0", "admin", 3),
                ("fedcba98765432100", "viewer", 4),
            ]
        );
        let e = parse_tokens("admin\n").expect_err("one field");
        assert!(e.contains("line 1"), "{e}");
        let e = parse_tokens("admin tok extra\n").expect_err("three fields");
        assert!(e.contains("line 1") && !e.contains("tok"), "{e}");
        assert!(parse_tokens("# nothing\n").is_err());
    }

    #[test]
    fn roles_file() {
        let roles = parse_roles(
            "operator:\n  publish: [/cmd_vel]\n  topics_sub_glob: \"['/camera/*', '/odom']\"\n  params_glob: ['/ctl:*']\nguest:\n",
        )
        .expect("ok");
        let op = &roles[0];
        assert_eq!(op.name, "operator");
        assert_eq!(op.globs[Class::Publish as usize], vec!["/cmd_vel"]);
        assert_eq!(
            op.globs[Class::Subscribe as usize],
            vec!["/camera/*", "/odom"]
        );
        assert_eq!(op.globs[Class::ParamRead as usize], vec!["/ctl:*"]);
        assert_eq!(op.globs[Class::ParamWrite as usize], vec!["/ctl:*"]);
        assert!(roles[1].globs.iter().all(Vec::is_empty));
        let e = parse_roles("x:\n  publsh: ['/a']\n").expect_err("typo");
        assert!(e.contains("unknown class \"publsh\""), "{e}");
        let e = parse_roles("x:\n  publish: 5\n").expect_err("not a list");
        assert!(e.contains("list of globs"), "{e}");
        let e = parse_roles("x: [\n").expect_err("yaml");
        assert!(e.contains("line"), "{e}");
    }
}
