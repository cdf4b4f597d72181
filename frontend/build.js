// Bundle each widget's module into one self-contained ES module inside the Python package,
// where anywidget loads it from (nothing is fetched at run time). `npm run build`;
// `node build.js --outdir DIR` writes the bundles elsewhere (to compare with the committed).
import { build } from "esbuild";

const at = process.argv.indexOf("--outdir");
const outdir = at >= 0 ? process.argv[at + 1] : "../labkit/viz/static";

const widgets = ["live", "timeline", "graph"];
for (const name of widgets) {
  await build({
    entryPoints: [`src/${name}.js`],
    outfile: `${outdir}/${name}.js`,
    bundle: true,
    format: "esm",
    minify: true,
    target: "es2020",
    legalComments: "none",
    banner: { js: `// labkit ${name} widget: built from frontend/src by \`npm run build\`; do not edit.` },
  });
  console.log(`built ${outdir}/${name}.js`);
}
