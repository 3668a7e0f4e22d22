// dashboard client
