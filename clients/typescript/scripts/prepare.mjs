// npm's `prepare`: builds dist/ with tsc, one of this folder's devDependencies. Run
// from `npm ci` here, and again when an application installs this folder
// (`npm install <folder>`); the latter installs no devDependencies of ours, hence
// `npm ci` here first.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));
if (!existsSync(tsc)) {
  console.error(
    `jobqueue-client: dist/ is built with TypeScript, a devDependency: run \`npm ci\` in ${root} first, then install it again`,
  );
  process.exit(1);
}
const built = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], {
  cwd: root,
  stdio: "inherit",
});
process.exit(built.status ?? 1);
