/** ASMTP.md §10, items 1–94, in order. */
import './routing';
import './admin';
import './accept';
import './read';
import './mailbox';
import './read-state';
import './push';
import './files';
import './agents';
import './search';
import './cli';
