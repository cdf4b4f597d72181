// The graph explorer's anywidget module (bundled into labkit/viz/static/graph.js).
import { render } from "./graph/explorer.js";

export default { render };
