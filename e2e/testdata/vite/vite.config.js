// The test passes --port: strictPort so a restarted server comes back on
// it, where the page polls for it. The cache in the project, not in the
// node_modules the test's copies share.
export default { cacheDir: ".vite", clearScreen: false, server: { strictPort: true } };
