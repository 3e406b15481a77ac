/** The roost group: every extension of EXTENSIONS.md. */
import './quirks';
import './resume';
import './receipts';
import './schedules';
import './guard';
import './orgs';
import './limits';
