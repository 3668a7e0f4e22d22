//! The dashboard's files, compiled into the binary so it works offline
//! (no CDN, no bundler): plain HTML, CSS and JavaScript that speak the
//! rosbridge protocol over the same port's WebSocket.

use rosgate_core::hub::{Asset, HttpSettings};

/// What the HTTP side serves: the dashboard and the version.
pub fn http_settings() -> HttpSettings {
    HttpSettings {
        assets: vec![
            Asset {
                path: "/index.html",
                content_type: "text/html; charset=utf-8",
                body: include_bytes!("../assets/index.html"),
            },
            Asset {
                path: "/dashboard.js",
                content_type: "text/javascript; charset=utf-8",
                body: include_bytes!("../assets/dashboard.js"),
            },
            Asset {
                path: "/dashboard.css",
                content_type: "text/css; charset=utf-8",
                body: include_bytes!("../assets/dashboard.css"),
            },
            Asset {
                path: "/favicon.svg",
                content_type: "image/svg+xml",
                body: include_bytes!("../assets/favicon.svg"),
            },
        ],
        version: env!("CARGO_PKG_VERSION").to_string(),
    }
}
