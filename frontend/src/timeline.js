// The timeline explorer's anywidget module (bundled into labkit/viz/static/timeline.js).
import { render } from "./timeline/explorer.js";

export default { render };
