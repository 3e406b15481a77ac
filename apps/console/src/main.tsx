import { render } from 'preact';
import { App } from './app';
import './styles.css';

// A deep link (`/console/agents/@acme.bot`, served index.html) becomes the hash route it names.
const deep = /^(.*?\/console\/)(.+)$/.exec(location.pathname);
if (deep && location.hash === '') history.replaceState(null, '', `${deep[1]}#/${deep[2]}`);

render(<App />, document.getElementById('app') as HTMLElement);
