/// The console's pages as Mustache templates (swift-mustache), in the executable so that a
/// deployment is one file. `{{x}}` escapes HTML; every page starts with the `head` partial and ends
/// with `foot`; each form carries the login's form token (`chrome.formToken`) and where to come
/// back to (`chrome.path`).
enum ConsoleTemplates {
    static let all: [String: String] = [
        "head": head, "foot": foot, "form-fields": formFields, "live": live, "transactions": transactions,
        "transaction-row": transactionRow, "activity-item": activityItem, "policy-form": policyForm,
        "login": login, "store": store, "app": app, "account": account, "transaction": transaction,
        "receipt": receipt, "receipts": receipts, "sandbox": sandbox, "problem": problem
    ]

    static let head = #"""
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{chrome.title}} · StoreBus console</title>
        <link rel="stylesheet" href="/static/console.css">
        <script src="/static/console.js" defer></script>
        </head>
        <body>
        <a class="skip" href="#main">Skip to the content</a>
        <header class="top">
        <p class="brand"><a href="/">StoreBus console</a></p>
        {{#chrome.loggedIn}}
        <nav aria-label="Main">
        <ul>
        <li><a href="/">Store</a></li>
        <li><a href="/receipts">Receipts</a></li>
        <li><a href="/sandbox">Sandbox</a></li>
        </ul>
        </nav>
        <form method="post" action="/logout" class="logout"><input type="hidden" name="formToken" value="{{chrome.formToken}}"><button type="submit">Log out</button></form>
        {{/chrome.loggedIn}}
        </header>
        <main id="main">
        {{#chrome.hasTrail}}<nav aria-label="Breadcrumb" class="trail"><ol>{{#chrome.trail}}<li><a href="{{url}}">{{name}}</a></li>{{/chrome.trail}}</ol></nav>{{/chrome.hasTrail}}
        <h1>{{chrome.title}}</h1>
        {{#chrome.flash}}<div class="flash {{kind}}" role="{{role}}" id="flash">{{text}}</div>{{/chrome.flash}}
        """#

    static let foot = #"""
        </main>
        <footer class="bottom"><p>StoreBus console · every action is an admin call through the gateway</p></footer>
        </body>
        </html>
        """#

    /// The hidden fields of every form that acts.
    static let formFields = #"""
        <input type="hidden" name="formToken" value="{{chrome.formToken}}"><input type="hidden" name="back" value="{{chrome.path}}">
        """#

    static let live = #"""
        <p class="live" data-live-stream="{{liveURL}}"><span data-live-state role="status">Reload the page to see what changed since it was shown.</span></p>
        """#

    static let transactions = #"""
        <table class="transactions" data-live-transactions>
        <caption>{{transactionsCaption}}</caption>
        <thead><tr><th scope="col">Date</th><th scope="col">Transaction</th><th scope="col">Account</th><th scope="col">Device</th><th scope="col">Product</th><th scope="col">State</th><th scope="col">Notes</th></tr></thead>
        <tbody>
        {{#transactions}}{{> transaction-row}}
        {{/transactions}}
        </tbody>
        </table>
        {{^transactions}}<p class="empty" data-live-empty>No transactions yet.</p>{{/transactions}}
        """#

    static let transactionRow = #"""
        <tr id="tx-{{id}}"><td><time datetime="{{date}}">{{date}}</time></td><td><a href="{{url}}">{{id}}</a></td><td><a href="{{accountURL}}">{{account}}</a></td><td>{{device}}</td><td>{{product}}</td><td><span class="state state-{{state}}">{{state}}</span></td><td>{{notes}}</td></tr>
        """#

    static let activityItem = #"""
        <li><time datetime="{{date}}">{{date}}</time> <a href="{{url}}">{{account}}</a> <span class="app">({{app}})</span>: {{text}}</li>
        """#

    static let policyForm = #"""
        <form method="post" action="/actions/policy" class="card">
        {{> form-fields}}
        <input type="hidden" name="app" value="{{policy.app}}"><input type="hidden" name="account" value="{{policy.account}}">
        <fieldset>
        <legend>{{policy.legend}}</legend>
        <p><label for="policy-mode">How the sandbox answers new payments</label>
        <select id="policy-mode" name="mode">{{#policy.modes}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/policy.modes}}</select></p>
        <p><label for="policy-error">Error of a failing payment</label>
        <select id="policy-error" name="error">{{#policy.errors}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/policy.errors}}</select></p>
        <p><label for="policy-delay">Milliseconds before the answer (0 to 600000)</label>
        <input id="policy-delay" name="delayMs" type="number" min="0" max="600000" value="{{policy.delayMs}}"></p>
        <p><input id="policy-restricted" name="restricted" type="checkbox" value="on"{{#policy.restricted}} checked{{/policy.restricted}}> <label for="policy-restricted">Purchases restricted (canMakePayments is false)</label></p>
        <p><button type="submit">Set the policy</button></p>
        </fieldset>
        </form>
        """#

    static let login = #"""
        {{> head}}
        <form method="post" action="/login" class="card narrow">
        <p>Log in with an admin key of the gateway (a key with <code>"admin": true</code> in its configuration).</p>
        <p><label for="admin-key">Admin key</label>
        <input id="admin-key" name="adminKey" type="password" autocomplete="current-password" required autofocus></p>
        <p><button type="submit">Log in</button></p>
        </form>
        {{> foot}}
        """#

    static let store = #"""
        {{> head}}
        <section aria-labelledby="apps-heading">
        <h2 id="apps-heading">Apps</h2>
        <table>
        <caption>Apps of catalog version {{catalogVersion}}, loaded {{loadedAt}}</caption>
        <thead><tr><th scope="col">App</th><th scope="col">Default storefront</th><th scope="col">Default locale</th></tr></thead>
        <tbody>
        {{#apps}}<tr><th scope="row"><a href="{{url}}">{{bundleId}}</a></th><td>{{defaultStorefront}}</td><td>{{defaultLocale}}</td></tr>
        {{/apps}}
        </tbody>
        </table>
        <p>Storefronts: {{#storefronts}}<span class="tag">{{countryCode}} ({{currencyCode}}, {{locale}})</span> {{/storefronts}}</p>
        </section>
        <section aria-labelledby="recent-heading">
        <h2 id="recent-heading">Recent transactions</h2>
        {{> live}}
        {{> transactions}}
        </section>
        <section aria-labelledby="activity-heading">
        <h2 id="activity-heading">Other activity</h2>
        <ul class="activity" data-live-activity>
        {{#activity}}{{> activity-item}}
        {{/activity}}
        </ul>
        {{^activity}}<p class="empty">Downloads, subscription changes, refunds and cleared histories appear here.</p>{{/activity}}
        </section>
        {{> foot}}
        """#

    static let app = #"""
        {{> head}}
        <section aria-labelledby="products-heading">
        <h2 id="products-heading">Products</h2>
        <table>
        <caption>Products of {{app}}, with their prices in each storefront</caption>
        <thead><tr><th scope="col">Product</th><th scope="col">Type</th><th scope="col">For sale</th>{{#storefronts}}<th scope="col">{{.}}</th>{{/storefronts}}<th scope="col">Subscription group</th><th scope="col">Hosted content</th></tr></thead>
        <tbody>
        {{#products}}<tr><th scope="row">{{id}}</th><td>{{type}}</td><td>{{forSale}}</td>{{#prices}}<td class="price">{{.}}</td>{{/prices}}<td>{{group}}</td><td>{{#content}}<span class="tag">{{id}} {{version}}, {{size}}, {{files}} files</span> {{/content}}</td></tr>
        {{/products}}
        </tbody>
        </table>
        </section>
        <section aria-labelledby="groups-heading">
        <h2 id="groups-heading">Subscription groups</h2>
        {{#groups}}<h3>{{id}}</h3>
        <ol>{{#levels}}<li>{{product}}: {{level}}renews every {{period}}</li>{{/levels}}</ol>
        {{/groups}}
        {{^groups}}<p class="empty">No auto-renewable subscriptions.</p>{{/groups}}
        </section>
        <section aria-labelledby="accounts-heading">
        <h2 id="accounts-heading">Accounts</h2>
        <form method="get" action="{{appURL}}/account" class="inline">
        <label for="find-account">Open an account</label> <input id="find-account" name="account" required maxlength="64"> <button type="submit">Open</button>
        </form>
        <table>
        <caption>Accounts of {{app}} with transactions</caption>
        <thead><tr><th scope="col">Account</th><th scope="col">Devices (transactions)</th><th scope="col">Transactions</th><th scope="col">Unfinished</th><th scope="col">Last transaction</th></tr></thead>
        <tbody>
        {{#accounts}}<tr><th scope="row"><a href="{{url}}">{{account}}</a></th><td>{{devices}}</td><td>{{count}}</td><td>{{unfinished}}</td><td><time datetime="{{last}}">{{last}}</time></td></tr>
        {{/accounts}}
        </tbody>
        </table>
        {{^accounts}}<p class="empty">No account has bought anything yet.</p>{{/accounts}}
        {{#nextAccounts}}<p><a href="{{nextAccounts}}">Next accounts</a></p>{{/nextAccounts}}
        </section>
        <section aria-labelledby="controls-heading">
        <h2 id="controls-heading">Sandbox controls of {{app}}</h2>
        {{> policy-form}}
        <form method="post" action="/actions/renewal-rate" class="card">
        {{> form-fields}}<input type="hidden" name="app" value="{{app}}">
        <p><label for="renewal-rate">Store clock: how fast subscriptions renew ({{rateNote}})</label>
        <select id="renewal-rate" name="rate">{{#rates}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/rates}}</select>
        <button type="submit">Set the rate</button></p>
        </form>
        <form method="post" action="/actions/billing" class="card">
        {{> form-fields}}<input type="hidden" name="app" value="{{app}}">
        <fieldset><legend>Billing of renewals</legend>
        <p><input id="billing-retry" name="retry" type="checkbox" value="on"> <label for="billing-retry">Renewals fail into billing retry</label></p>
        <p><input id="billing-grace" name="grace" type="checkbox" value="on"> <label for="billing-grace">With a grace period (the customer keeps access while billing is retried)</label></p>
        <p><button type="submit">Set billing</button></p>
        </fieldset>
        </form>
        </section>
        <section aria-labelledby="recent-heading">
        <h2 id="recent-heading">Recent transactions of {{app}}</h2>
        {{> live}}
        {{> transactions}}
        </section>
        {{> foot}}
        """#

    static let account = #"""
        {{> head}}
        <section aria-labelledby="transactions-heading">
        <h2 id="transactions-heading">Transactions</h2>
        {{> live}}
        {{> transactions}}
        {{#moreTransactions}}<p>Only the first {{shownTransactions}} are shown.</p>{{/moreTransactions}}
        </section>
        <section aria-labelledby="subscriptions-heading">
        <h2 id="subscriptions-heading">Subscriptions</h2>
        {{#subscriptions}}
        <div class="card">
        <h3>{{group}}: {{product}}</h3>
        <dl class="facts">
        <dt>Status</dt><dd><span class="state state-{{statusClass}}">{{status}}</span></dd>
        <dt>Expires</dt><dd>{{expires}}</dd>
        <dt>Auto-renew</dt><dd>{{autoRenew}}{{#renewsTo}}, to {{renewsTo}}{{/renewsTo}}</dd>
        <dt>Renewals</dt><dd>{{renewals}}</dd>
        <dt>Original transaction</dt><dd><a href="{{originalURL}}">{{original}}</a></dd>
        <dt>Latest transaction</dt><dd><a href="{{latestURL}}">{{latest}}</a></dd>
        {{#billingRetryEnds}}<dt>Billing retry ends</dt><dd>{{billingRetryEnds}}</dd>{{/billingRetryEnds}}
        {{#graceEnds}}<dt>Grace period ends</dt><dd>{{graceEnds}}</dd>{{/graceEnds}}
        </dl>
        <div class="actions">
        <form method="post" action="/actions/renew-now">{{> form-fields}}<input type="hidden" name="app" value="{{app}}"><input type="hidden" name="account" value="{{account}}"><input type="hidden" name="group" value="{{group}}"><button type="submit">Renew now</button></form>
        <form method="post" action="/actions/auto-renew">{{> form-fields}}<input type="hidden" name="app" value="{{app}}"><input type="hidden" name="account" value="{{account}}"><input type="hidden" name="group" value="{{group}}"><input type="hidden" name="on" value="{{autoRenewToggle}}"><button type="submit">Turn auto-renew {{autoRenewToggle}}</button></form>
        <form method="post" action="/actions/expire-now">{{> form-fields}}<input type="hidden" name="app" value="{{app}}"><input type="hidden" name="account" value="{{account}}"><input type="hidden" name="group" value="{{group}}">
        <input id="expire-confirm-{{index}}" name="confirm" type="checkbox" value="yes" required> <label for="expire-confirm-{{index}}">Yes, expire it</label> <button type="submit">Expire now</button></form>
        <form method="post" action="/actions/extend">{{> form-fields}}<input type="hidden" name="app" value="{{app}}"><input type="hidden" name="account" value="{{account}}"><input type="hidden" name="group" value="{{group}}">
        <label for="extend-days-{{index}}">Days</label> <input id="extend-days-{{index}}" name="days" type="number" min="1" max="90" value="7" required>
        <label for="extend-reason-{{index}}">Reason</label> <select id="extend-reason-{{index}}" name="reason"><option value="0">Undeclared</option><option value="1">Customer satisfaction</option><option value="2">Other</option><option value="3">Service issue or outage</option></select>
        <button type="submit">Extend the renewal date</button></form>
        </div>
        </div>
        {{/subscriptions}}
        {{^subscriptions}}<p class="empty">No auto-renewable subscription.</p>{{/subscriptions}}
        </section>
        <section aria-labelledby="downloads-heading" id="downloads" {{#anyActive}}data-live-downloads{{/anyActive}}>
        <h2 id="downloads-heading">Downloads</h2>
        <table>
        <caption>Hosted content downloads of the account's devices, as the download service has served them</caption>
        <thead><tr><th scope="col">Device</th><th scope="col">Transaction</th><th scope="col">Content</th><th scope="col">State</th><th scope="col">Served</th></tr></thead>
        <tbody>
        {{#downloads}}<tr><td>{{device}}</td><td><a href="{{transactionURL}}">{{transaction}}</a></td><td>{{content}}</td><td>{{state}}</td><td><progress id="progress-{{index}}" max="100" value="{{percent}}" aria-label="{{content}} of transaction {{transaction}}">{{percent}}%</progress> {{percent}}% of {{size}}</td></tr>
        {{/downloads}}
        </tbody>
        </table>
        {{^downloads}}<p class="empty">No download started.</p>{{/downloads}}
        </section>
        <section aria-labelledby="charges-heading">
        <h2 id="charges-heading">Charges</h2>
        <table>
        <caption>The charge ledger of the account</caption>
        <thead><tr><th scope="col">Charge</th><th scope="col">Date</th><th scope="col">Transaction</th><th scope="col">Product</th><th scope="col">Amount</th><th scope="col">Storefront</th><th scope="col">Refunded</th></tr></thead>
        <tbody>
        {{#charges}}<tr><td>{{id}}</td><td><time datetime="{{date}}">{{date}}</time></td><td><a href="{{transactionURL}}">{{transaction}}</a></td><td>{{product}}</td><td>{{amount}} {{currency}}</td><td>{{storefront}}</td><td>{{refunded}}</td></tr>
        {{/charges}}
        </tbody>
        </table>
        {{^charges}}<p class="empty">Nothing charged.</p>{{/charges}}
        </section>
        <section aria-labelledby="policy-heading">
        <h2 id="policy-heading">Payment policy</h2>
        <p>In effect: <strong>{{policyNow}}</strong>{{#policyIsDefault}} (the app's default){{/policyIsDefault}}.</p>
        {{> policy-form}}
        </section>
        <section aria-labelledby="receipt-heading">
        <h2 id="receipt-heading">Receipt</h2>
        <p><a href="{{receiptURL}}">Refresh and decode the account's receipt</a></p>
        </section>
        <section aria-labelledby="clear-heading">
        <h2 id="clear-heading">Clear purchase history</h2>
        <form method="post" action="/actions/clear-history" class="card danger">
        {{> form-fields}}<input type="hidden" name="app" value="{{app}}"><input type="hidden" name="account" value="{{account}}">
        <p>Payments still in progress fail, unfinished transactions are removed from the devices' queues and entitlements revoked; the charge ledger stays.</p>
        <p><input id="clear-confirm" name="confirm" type="checkbox" value="yes" required> <label for="clear-confirm">Yes, clear the purchase history of {{account}}</label></p>
        <p><button type="submit">Clear the history</button></p>
        </form>
        </section>
        {{> foot}}
        """#

    static let transaction = #"""
        {{> head}}
        <dl class="facts card">
        <dt>State</dt><dd><span class="state state-{{state}}">{{state}}</span>{{#finished}}, finished{{/finished}}</dd>
        <dt>Product</dt><dd>{{product}} ({{productType}}), quantity {{quantity}}</dd>
        <dt>Date</dt><dd>{{date}}</dd>
        <dt>Queue</dt><dd>app {{app}}, account <a href="{{accountURL}}">{{account}}</a>, device {{device}}</dd>
        <dt>Price</dt><dd>{{price}} {{currency}} in {{storefront}}</dd>
        {{#original}}<dt>Original transaction</dt><dd><a href="{{originalURL}}">{{original}}</a></dd>{{/original}}
        {{#reason}}<dt>Reason</dt><dd>{{reason}}</dd>{{/reason}}
        {{#expires}}<dt>Expires</dt><dd>{{expires}}</dd>{{/expires}}
        {{#group}}<dt>Subscription group</dt><dd>{{group}}</dd>{{/group}}
        {{#cancelled}}<dt>Refunded</dt><dd>{{cancelled}} ({{cancellationReason}})</dd>{{/cancelled}}
        {{#error}}<dt>Error</dt><dd>{{error}}</dd>{{/error}}
        {{#downloads}}<dt>Download of {{content}}</dt><dd>{{state}}, {{percent}}% ({{size}})</dd>{{/downloads}}
        </dl>
        <section aria-labelledby="actions-heading">
        <h2 id="actions-heading">Actions</h2>
        {{#deferred}}
        <div class="actions">
        <form method="post" action="/actions/approve">{{> form-fields}}<input type="hidden" name="transaction" value="{{id}}"><button type="submit">Approve the Ask to Buy</button></form>
        <form method="post" action="/actions/decline">{{> form-fields}}<input type="hidden" name="transaction" value="{{id}}"><button type="submit">Decline the Ask to Buy</button></form>
        </div>
        {{/deferred}}
        {{#failed}}
        <form method="post" action="/actions/resolve" class="card">{{> form-fields}}<input type="hidden" name="transaction" value="{{id}}">
        <p>An interrupted purchase failed until the customer finishes what the store asked of them outside the app; resolving it adds a new, purchased transaction, charged once.</p>
        <p><button type="submit">Resolve the interrupted purchase</button></p></form>
        {{/failed}}
        {{#refundable}}
        <form method="post" action="/actions/refund" class="card danger">{{> form-fields}}<input type="hidden" name="transaction" value="{{id}}">
        <p><label for="refund-reason">Reason</label> <select id="refund-reason" name="reason"><option value="other">Other</option><option value="app-issue">An issue with the app</option></select></p>
        <p><label for="refund-note">Note (kept with the refund)</label> <input id="refund-note" name="note" maxlength="200"></p>
        <p><input id="refund-confirm" name="confirm" type="checkbox" value="yes" required> <label for="refund-confirm">Yes, refund transaction {{id}}</label></p>
        <p><button type="submit">Refund</button></p>
        </form>
        {{/refundable}}
        {{#subscription}}<p>This transaction is of the subscription group {{group}}: its controls (renew, expire, extend, auto-renew) are on <a href="{{accountURL}}">the account's page</a>.</p>{{/subscription}}
        {{^hasActions}}<p class="empty">Nothing to do on a {{state}} transaction.</p>{{/hasActions}}
        </section>
        {{> foot}}
        """#

    static let receipt = #"""
        {{> head}}
        <dl class="facts card">
        <dt>Verdict</dt><dd><span class="state state-{{verdictClass}}">{{verdict}}</span> (status {{status}})</dd>
        {{#environment}}<dt>Environment</dt><dd>{{environment}}</dd>{{/environment}}
        {{#bundleId}}<dt>Bundle identifier</dt><dd>{{bundleId}}</dd>{{/bundleId}}
        {{#version}}<dt>Application version</dt><dd>{{version}} (originally {{originalVersion}})</dd>{{/version}}
        {{#created}}<dt>Receipt created</dt><dd>{{created}}</dd>{{/created}}
        {{#receiptType}}<dt>Receipt type</dt><dd>{{receiptType}}</dd>{{/receiptType}}
        {{#asOf}}<dt>As of the log's position</dt><dd>{{asOf}}</dd>{{/asOf}}
        </dl>
        <table>
        <caption>In-app purchases in the receipt</caption>
        <thead><tr><th scope="col">Transaction</th><th scope="col">Original</th><th scope="col">Product</th><th scope="col">Quantity</th><th scope="col">Purchased</th><th scope="col">Expires</th><th scope="col">Cancelled</th></tr></thead>
        <tbody>
        {{#inApp}}<tr><td>{{id}}</td><td>{{original}}</td><td>{{product}}</td><td>{{quantity}}</td><td>{{purchased}}</td><td>{{expires}}</td><td>{{cancelled}}</td></tr>
        {{/inApp}}
        </tbody>
        </table>
        {{^inApp}}<p class="empty">No in-app purchase.</p>{{/inApp}}
        {{#hasPending}}<h2>Pending renewals</h2><ul>{{#pending}}<li>{{.}}</li>{{/pending}}</ul>{{/hasPending}}
        <details><summary>The receipt, base64</summary><pre class="receipt-data">{{receiptData}}</pre></details>
        {{> foot}}
        """#

    static let receipts = #"""
        {{> head}}
        <form method="post" action="/receipts" class="card">
        <input type="hidden" name="formToken" value="{{chrome.formToken}}">
        <p><label for="receipt-app">App</label> <select id="receipt-app" name="app">{{#apps}}<option value="{{.}}">{{.}}</option>{{/apps}}</select></p>
        <p><label for="receipt-data">Receipt (base64, as an app sends it to its server)</label>
        <textarea id="receipt-data" name="receipt" rows="8" required></textarea></p>
        <p><label for="receipt-secret">Shared secret (for receipts with auto-renewable subscriptions)</label> <input id="receipt-secret" name="password" autocomplete="off"></p>
        <p><button type="submit">Verify and decode</button></p>
        </form>
        {{> foot}}
        """#

    static let sandbox = #"""
        {{> head}}
        <section aria-labelledby="catalog-heading">
        <h2 id="catalog-heading">Catalog</h2>
        <form method="post" action="/actions/reload-catalog" class="card">
        {{> form-fields}}
        <p>Reads the catalog files again; a catalog with problems is not taken.</p>
        <p><input id="reload-dry" name="dryRun" type="checkbox" value="on"> <label for="reload-dry">Only check it (dry run)</label></p>
        <p><button type="submit">Reload the catalog</button></p>
        </form>
        </section>
        <section aria-labelledby="signing-heading">
        <h2 id="signing-heading">Signing key</h2>
        <form method="post" action="/actions/rotate-key" class="card">
        {{> form-fields}}
        <p>Makes a new leaf key and certificate under the same root: receipts and signed transactions from now on use it; earlier ones still verify.</p>
        <p><button type="submit">Rotate the signing key</button></p>
        </form>
        </section>
        <section aria-labelledby="shards-heading">
        <h2 id="shards-heading">Payment queue shards</h2>
        <table>
        <caption>Shards of the payment queue's log and their owners</caption>
        <thead><tr><th scope="col">Shard</th><th scope="col">Owner</th><th scope="col">Epoch</th><th scope="col">Leased</th><th scope="col">Head</th></tr></thead>
        <tbody>
        {{#shards}}<tr><td>{{shard}}</td><td>{{owner}}</td><td>{{epoch}}</td><td>{{leased}}</td><td>{{head}}</td></tr>
        {{/shards}}
        </tbody>
        </table>
        </section>
        <section aria-labelledby="reset-heading">
        <h2 id="reset-heading">Reset the sandbox</h2>
        <form method="post" action="/actions/reset" class="card danger">
        {{> form-fields}}
        <p>Deletes every transaction, payment policy and charge of every app. The event log is kept: devices hear their transactions removed.</p>
        <p><input id="reset-confirm" name="confirm" type="checkbox" value="yes" required> <label for="reset-confirm">Yes, delete everything</label></p>
        <p><button type="submit">Reset</button></p>
        </form>
        </section>
        {{> foot}}
        """#

    static let problem = #"""
        {{> head}}
        <p class="flash error" role="alert">{{message}}</p>
        <p><a href="/">Back to the store</a></p>
        {{> foot}}
        """#
}
