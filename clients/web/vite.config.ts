// The production build has fixed file names (index.html, assets/app.js, assets/app.css): Envoy serves each
// by name (deploy/envoy/dashboard.yaml), and tests/web checks that nothing else is built.
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

const gen = fileURLToPath(new URL("../../gen/ts", import.meta.url));

export default defineConfig({
  plugins: [react()],
  resolve: { alias: { "@gen": gen } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 1_000_000,
    cssCodeSplit: false,
    modulePreload: false,
    rollupOptions: {
      output: {
        entryFileNames: "assets/app.js",
        chunkFileNames: "assets/app-[name].js",
        assetFileNames: "assets/app[extname]",
      },
    },
  },
  // `npm run dev`: the app on :5173, calling the API through the Envoy of `jobmesh dev` (VITE_API_URL).
  server: { host: "127.0.0.1", port: 5173, fs: { allow: ["../.."] } },
  test: { environment: "node", include: ["src/**/*.test.ts"] },
});
